/**
 * Block key -> arena entry, for the block index: an open-addressing table whose slots hold only
 * the entry's index (4 bytes); the key is compared in the arena's `keys`, where the entry keeps
 * it anyway. A slot of (key + 1, index) float64s was 16 bytes and a table at most half full holds
 * 2 to 4 slots a key: 32 to 64 bytes a key against 8 to 16 here. A probe reads the arena's key
 * of each entry it passes (a second cache line), the price of the bytes saved.
 * Linear probing, backward-shift deletion (no tombstones), load factor at most 1/2.
 *
 * A slot's top 4 bits hold its entry's displacement, how far past its key's home slot it lies
 * (15: 15 or more), and the low 28 bits arena index + 1. A probe at distance d from its key's
 * home reads the arena key only of a slot whose displacement is d (the others hold keys of other
 * homes), and a deletion finds where a later slot's key belongs without reading its key: each
 * arena read skipped is a cache miss saved, as the arena is laid out by insertion, not by slot.
 * The arena then holds at most 2^28 - 1 entries (MAX_ENTRIES).
 *
 * The arena must keep a mapped entry's key where it is: its owner repoints a slot (`repoint`,
 * with the slot found before the move) when compaction moves the entry.
 */
import type { BlockKey } from '../../kv/blockKey.ts';
import { homeShift, keyHome, slotsFor } from './keyHome.ts';
import type { BlockArena } from './blockArena.ts';

/**
 * Slots below which the table grows fourfold, not twofold (1 MiB of slots): an index not
 * presized fills from empty, and each growth is a pass reading the arena key of every entry.
 */
const QUADRUPLE_BELOW = 1 << 18;
/** `entryAt` of an empty slot. */
export const EMPTY = -1;
/** A slot's arena index + 1. */
const INDEX_BITS = 0x0fff_ffff;
/** Where a slot's displacement starts, and the largest one held exactly (15 is "15 or more"). */
const DISPLACEMENT_SHIFT = 28;
const SATURATED = 15;
/** Entries the table can point at. */
export const MAX_ENTRIES = INDEX_BITS;

export class EntryTable {
  readonly #arena: BlockArena;
  /**
   * Displacement << 28 | arena index + 1 per slot, 0 where none: a new table is zeros, whose
   * pages the system maps only when written (a table presized for a fleet's pools costs nothing
   * until it fills).
   */
  #slots: Int32Array;
  /** The displacement of the empty slot `probe` last returned, for `put`. */
  #probed = 0;
  #mask: number;
  #shift: number;
  #size = 0;
  /** What `touch` read, kept only so that its loads are not optimized away. */
  touched = 0;

  constructor(arena: BlockArena, expectedKeys = 0) {
    this.#arena = arena;
    const slots = slotsFor(expectedKeys);
    this.#slots = new Int32Array(slots);
    this.#mask = slots - 1;
    this.#shift = homeShift(slots);
  }

  get size(): number {
    return this.#size;
  }

  get slots(): number {
    return this.#mask + 1;
  }

  /**
   * Loads the home slot of each of `keys`, and the arena key of the entry there, without acting
   * on them: the loads are independent, so the CPU overlaps their cache misses and the probes
   * that follow hit the cache instead of waiting on memory one key at a time.
   */
  touch(keys: ArrayLike<BlockKey>): void {
    const slots = this.#slots;
    const arenaKeys = this.#arena.keys;
    let sink = 0;
    for (let i = 0; i < keys.length; i++) {
      const slot = slots[keyHome(keys[i]!, this.#shift)]!;
      // Only an entry at its own home can hold the key there.
      if (slot !== 0 && slot >>> DISPLACEMENT_SHIFT === 0) sink += arenaKeys[slot - 1]!;
    }
    this.touched = sink;
  }

  /** Arena entry of `key`, or -1. */
  find(key: BlockKey): number {
    const slot = this.slotOf(key);
    return slot < 0 ? -1 : (this.#slots[slot]! & INDEX_BITS) - 1;
  }

  /** Slot holding `key`, or -1. */
  slotOf(key: BlockKey): number {
    const slots = this.#slots;
    const arenaKeys = this.#arena.keys;
    let slot = keyHome(key, this.#shift);
    // d: this slot's distance from the key's home, held at SATURATED as a displacement is.
    for (let d = 0; ; ) {
      const entry = slots[slot]!;
      if (entry === 0) return -1;
      if (entry >>> DISPLACEMENT_SHIFT === d && arenaKeys[(entry & INDEX_BITS) - 1] === key) {
        return slot;
      }
      slot = (slot + 1) & this.#mask;
      if (d < SATURATED) d++;
    }
  }

  /**
   * Slot holding `key`, or the empty slot it would take (`entryAt` is then EMPTY; `put` fills
   * it before any other call). Grows first when one more key would pass the load factor.
   */
  probe(key: BlockKey): number {
    if ((this.#size + 1) * 2 > this.#mask + 1) this.#grow();
    const slots = this.#slots;
    const arenaKeys = this.#arena.keys;
    let slot = keyHome(key, this.#shift);
    for (let d = 0; ; ) {
      const entry = slots[slot]!;
      if (entry === 0) {
        this.#probed = d;
        return slot;
      }
      if (entry >>> DISPLACEMENT_SHIFT === d && arenaKeys[(entry & INDEX_BITS) - 1] === key) {
        return slot;
      }
      slot = (slot + 1) & this.#mask;
      if (d < SATURATED) d++;
    }
  }

  /** Arena entry at `slot`, or EMPTY. */
  entryAt(slot: number): number {
    return (this.#slots[slot]! & INDEX_BITS) - 1;
  }

  /** Fills the empty `slot` that `probe` returned with entry `at` (which holds the key). */
  put(slot: number, at: number): void {
    if (at >= MAX_ENTRIES) throw new RangeError(`block index: more than ${MAX_ENTRIES} entries`);
    this.#slots[slot] = (this.#probed << DISPLACEMENT_SHIFT) | (at + 1);
    this.#size++;
  }

  /** Points occupied `slot` at entry `at`, where its key has moved (or is about to). */
  repoint(slot: number, at: number): void {
    this.#slots[slot] = (this.#slots[slot]! & ~INDEX_BITS) | (at + 1);
  }

  /**
   * Empties `slot`, shifting later slots of the same probe run back so lookups stay correct.
   * The entries of the run must still hold their keys in the arena.
   */
  removeAt(slot: number): void {
    const slots = this.#slots;
    const arenaKeys = this.#arena.keys;
    const mask = this.#mask;
    let hole = slot;
    for (let next = (slot + 1) & mask; slots[next] !== 0; next = (next + 1) & mask) {
      const entry = slots[next]!;
      let displacement = entry >>> DISPLACEMENT_SHIFT;
      // A saturated displacement is read from the key, the only slots that need it.
      const home =
        displacement < SATURATED
          ? (next - displacement) & mask
          : keyHome(arenaKeys[(entry & INDEX_BITS) - 1]!, this.#shift);
      // The slot at `next` may move into the hole unless its home lies cyclically in (hole, next].
      const stays = hole <= next ? hole < home && home <= next : hole < home || home <= next;
      if (stays) continue;
      displacement = Math.min((hole - home) & mask, SATURATED);
      slots[hole] = (displacement << DISPLACEMENT_SHIFT) | (entry & INDEX_BITS);
      hole = next;
    }
    slots[hole] = 0;
    this.#size--;
  }

  #grow(): void {
    const old = this.#slots;
    const arenaKeys = this.#arena.keys;
    const count = old.length * (old.length < QUADRUPLE_BELOW ? 4 : 2);
    this.#mask = count - 1;
    this.#shift = homeShift(count);
    const slots = new Int32Array(count);
    for (let s = 0; s < old.length; s++) {
      const entry = old[s]! & INDEX_BITS;
      if (entry === 0) continue;
      let slot = keyHome(arenaKeys[entry - 1]!, this.#shift);
      let displacement = 0;
      while (slots[slot] !== 0) {
        slot = (slot + 1) & this.#mask;
        if (displacement < SATURATED) displacement++;
      }
      slots[slot] = (displacement << DISPLACEMENT_SHIFT) | entry;
    }
    this.#slots = slots;
  }
}
