/**
 * Block keys in least- to most-recently-used order, each held once: the order a Map keeps when
 * a touched key is deleted and set again, at O(1) a touch, a removal and an eviction. Each key
 * sits in a slot: a chained table maps key -> slot (BlockKeyTable, which hashes the 53-bit keys
 * that a Map hashes slowly) and an intrusive doubly linked list over the slots keeps the order
 * (FreeBlockQueue, least recent at the front). A Map finds its oldest key by iterating from its
 * start, past every entry deleted since its last rehash: O(size) an eviction once it is full and
 * churning, which made long runs with a CPU tier ~10-20x slower than without. Slots are
 * allocated as keys arrive, doubling up to the owner's bound when it gives one, so a large bound
 * that is never reached costs nothing. A key keeps its slot when the slots grow: only the table
 * is rebuilt (a pass over the slots in order), the list and the times are copied as they are.
 */
import type { BlockKey } from './blockKey.ts';
import { BlockKeyTable } from './blockKeyTable.ts';
import { FreeBlockQueue } from './freeBlockQueue.ts';

/** What `oldest` and `popOldest` return when no key is held (block keys are never negative). */
export const NO_OLDEST = -1;
/** Slots allocated first (then doubled as keys arrive). */
const FIRST_SLOTS = 64;

export class KeyLru {
  /** Key -> slot; `keyOf[slot]` is the slot's key. */
  #table: BlockKeyTable;
  /** Slots holding a key, least recent first. */
  #order: FreeBlockQueue;
  /** Slots holding no key, a stack of `#freeCount`. */
  #free: Int32Array;
  #freeCount = 0;
  /** Per slot, when its key was last touched (the caller's clock; 0 when it gives none). */
  #atMs: Float64Array;

  /** Slots never grow past this many (the owner's bound on keys held; Infinity: none). */
  readonly #maxSlots: number;

  /** `maxKeys`: the most keys the owner ever holds at once, when it bounds them. */
  constructor(maxKeys = Number.POSITIVE_INFINITY) {
    this.#maxSlots = Math.max(1, maxKeys);
    const slots = Math.min(FIRST_SLOTS, this.#maxSlots);
    this.#table = new BlockKeyTable(slots);
    this.#order = new FreeBlockQueue(slots);
    this.#free = new Int32Array(slots);
    this.#atMs = new Float64Array(slots);
    this.#freeAll();
  }

  get size(): number {
    return this.#table.size;
  }

  has(key: BlockKey): boolean {
    return this.#table.has(key);
  }

  /**
   * Makes `key` the most recent, touched at `atMs`, adding it when absent; true when it was
   * added.
   */
  touch(key: BlockKey, atMs = 0): boolean {
    const held = this.#table.get(key);
    if (held !== -1) {
      this.#order.remove(held);
      this.#order.pushBack(held);
      this.#atMs[held] = atMs;
      return false;
    }
    if (this.#freeCount === 0) this.#grow();
    const slot = this.#free[--this.#freeCount]!;
    this.#table.add(key, slot);
    this.#order.pushBack(slot);
    this.#atMs[slot] = atMs;
    return true;
  }

  /** Adds `key` as the most recent when absent; a held key keeps its place (Map.set). */
  addIfAbsent(key: BlockKey): boolean {
    return this.#table.has(key) ? false : this.touch(key);
  }

  /** Removes `key`; false when it is not held. */
  delete(key: BlockKey): boolean {
    const slot = this.#table.get(key);
    if (slot === -1) return false;
    this.#release(slot);
    return true;
  }

  /** The least recent key, or NO_OLDEST when none is held. */
  oldest(): BlockKey {
    const slot = this.#order.peekFront();
    return slot === -1 ? NO_OLDEST : this.#table.keyOf[slot]!;
  }

  /** When the least recent key was touched, or NaN when none is held. */
  oldestAtMs(): number {
    const slot = this.#order.peekFront();
    return slot === -1 ? Number.NaN : this.#atMs[slot]!;
  }

  /** Removes and returns the least recent key, or NO_OLDEST when none is held. */
  popOldest(): BlockKey {
    const slot = this.#order.peekFront();
    if (slot === -1) return NO_OLDEST;
    const key = this.#table.keyOf[slot]!;
    this.#release(slot);
    return key;
  }

  clear(): void {
    this.#table.clear();
    this.#order = new FreeBlockQueue(this.#free.length);
    this.#freeAll();
  }

  /** Keys held, least recent first; for tests and inspection. */
  keys(): BlockKey[] {
    const keyOf = this.#table.keyOf;
    return this.#order.toArray().map((slot) => keyOf[slot]!);
  }

  #release(slot: number): void {
    this.#table.deleteBlock(slot);
    this.#order.remove(slot);
    this.#free[this.#freeCount++] = slot;
  }

  /** Every slot free, the lowest on top. */
  #freeAll(): void {
    const slots = this.#free.length;
    for (let i = 0; i < slots; i++) this.#free[i] = slots - 1 - i;
    this.#freeCount = slots;
  }

  /**
   * Doubles the slots (at most to the bound; past it when the owner holds more than it said).
   * Called with every slot holding a key, so slots [0, old) keep theirs and [old, new) are free.
   */
  #grow(): void {
    const oldSlots = this.#free.length;
    const slots = Math.max(oldSlots + 1, Math.min(2 * oldSlots, this.#maxSlots));
    const oldKeyOf = this.#table.keyOf;
    const table = new BlockKeyTable(slots);
    for (let slot = 0; slot < oldSlots; slot++) table.add(oldKeyOf[slot]!, slot);
    const order = new FreeBlockQueue(slots);
    for (let slot = this.#order.peekFront(); slot !== -1; slot = this.#order.after(slot)) {
      order.pushBack(slot);
    }
    const atMs = new Float64Array(slots);
    atMs.set(this.#atMs);
    this.#table = table;
    this.#order = order;
    this.#atMs = atMs;
    this.#free = new Int32Array(slots);
    this.#freeCount = 0;
    for (let slot = slots - 1; slot >= oldSlots; slot--) this.#free[this.#freeCount++] = slot;
  }
}
