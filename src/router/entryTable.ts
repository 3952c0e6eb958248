/**
 * Block key -> arena entry, for the block index: an open-addressing table whose slots hold only
 * the entry's index (4 bytes); the key is compared in the arena's `keys`, where the entry keeps
 * it anyway. A slot of (key + 1, index) float64s was 16 bytes and a table at most half full holds
 * 2 to 4 slots a key: 32 to 64 bytes a key against 8 to 16 here. A probe reads the arena's key
 * of each entry it passes (a second cache line), the price of the bytes saved.
 * Linear probing, backward-shift deletion (no tombstones), load factor at most 1/2.
 *
 * The arena must keep a mapped entry's key where it is: its owner repoints a slot (`repoint`,
 * with the slot found before the move) when compaction moves the entry.
 */
import type { BlockKey } from '../kv/blockKey.ts';
import type { BlockArena } from './blockArena.ts';

/** 2^-32: multiplying by it is exact, as dividing by 2^32 is, and cheaper. */
const TWO_POW_MINUS_32 = 1 / 4294967296;
const MIN_SLOTS = 1024;
/** `entryAt` of an empty slot. */
export const EMPTY = -1;

export class EntryTable {
  readonly #arena: BlockArena;
  /**
   * Arena index + 1 per slot, 0 where none: a new table is zeros, whose pages the system maps
   * only when written (a table presized for a fleet's pools costs nothing until it fills).
   */
  #slots: Int32Array;
  #mask: number;
  #shift: number;
  #size = 0;
  /** What `touch` read, kept only so that its loads are not optimized away. */
  touched = 0;

  constructor(arena: BlockArena, expectedKeys = 0) {
    this.#arena = arena;
    let slots = MIN_SLOTS;
    while (slots < expectedKeys * 2) slots *= 2;
    this.#slots = new Int32Array(slots);
    this.#mask = slots - 1;
    this.#shift = 32 - Math.log2(slots);
  }

  get size(): number {
    return this.#size;
  }

  get slots(): number {
    return this.#mask + 1;
  }

  /** Home slot: both 32-bit halves of the key folded, then Fibonacci hashing for the top bits. */
  #home(key: number): number {
    return Math.imul((key >>> 0) ^ ((key * TWO_POW_MINUS_32) | 0), 0x9e3779b1) >>> this.#shift;
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
      const entry = slots[this.#home(keys[i]!)]!;
      if (entry !== 0) sink += arenaKeys[entry - 1]!;
    }
    this.touched = sink;
  }

  /** Arena entry of `key`, or -1. */
  find(key: BlockKey): number {
    const slots = this.#slots;
    const arenaKeys = this.#arena.keys;
    let slot = this.#home(key);
    for (;;) {
      const entry = slots[slot]!;
      if (entry === 0) return -1;
      if (arenaKeys[entry - 1] === key) return entry - 1;
      slot = (slot + 1) & this.#mask;
    }
  }

  /** Slot holding `key`, or -1. */
  slotOf(key: BlockKey): number {
    const slots = this.#slots;
    const arenaKeys = this.#arena.keys;
    let slot = this.#home(key);
    for (;;) {
      const entry = slots[slot]!;
      if (entry === 0) return -1;
      if (arenaKeys[entry - 1] === key) return slot;
      slot = (slot + 1) & this.#mask;
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
    let slot = this.#home(key);
    for (;;) {
      const entry = slots[slot]!;
      if (entry === 0 || arenaKeys[entry - 1] === key) return slot;
      slot = (slot + 1) & this.#mask;
    }
  }

  /** Arena entry at `slot`, or EMPTY. */
  entryAt(slot: number): number {
    return this.#slots[slot]! - 1;
  }

  /** Fills the empty `slot` that `probe` returned with entry `at` (which holds the key). */
  put(slot: number, at: number): void {
    this.#slots[slot] = at + 1;
    this.#size++;
  }

  /** Points occupied `slot` at entry `at`, where its key has moved (or is about to). */
  repoint(slot: number, at: number): void {
    this.#slots[slot] = at + 1;
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
      const home = this.#home(arenaKeys[slots[next]! - 1]!);
      // The slot at `next` may move into the hole unless its home lies cyclically in (hole, next].
      const stays = hole <= next ? hole < home && home <= next : hole < home || home <= next;
      if (stays) continue;
      slots[hole] = slots[next]!;
      hole = next;
    }
    slots[hole] = 0;
    this.#size--;
  }

  #grow(): void {
    const old = this.#slots;
    const arenaKeys = this.#arena.keys;
    const count = old.length * 2;
    this.#mask = count - 1;
    this.#shift = 32 - Math.log2(count);
    const slots = new Int32Array(count);
    for (let s = 0; s < old.length; s++) {
      const entry = old[s]!;
      if (entry === 0) continue;
      let slot = this.#home(arenaKeys[entry - 1]!);
      while (slots[slot] !== 0) slot = (slot + 1) & this.#mask;
      slots[slot] = entry;
    }
    this.#slots = slots;
  }
}
