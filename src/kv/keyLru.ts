/**
 * Block keys in least- to most-recently-used order, each held once: the order a Map keeps when
 * a touched key is deleted and set again, at O(1) a touch, a removal and an eviction. Each key
 * sits in a slot: a chained table maps key -> slot (BlockKeyTable, which hashes the 53-bit keys
 * that a Map hashes slowly) and an intrusive doubly linked list over the slots keeps the order
 * (FreeBlockQueue, least recent at the front). A Map finds its oldest key by iterating from its
 * start, past every entry deleted since its last rehash: O(size) an eviction once it is full and
 * churning, which made long runs with a CPU tier ~10-20x slower than without. Slots are
 * allocated as keys arrive, doubling, so a large bound that is never reached costs nothing.
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

  constructor() {
    this.#table = new BlockKeyTable(FIRST_SLOTS);
    this.#order = new FreeBlockQueue(FIRST_SLOTS);
    this.#free = new Int32Array(FIRST_SLOTS);
    this.#atMs = new Float64Array(FIRST_SLOTS);
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

  /** Doubles the slots, the keys moved in order to slots 0, 1, ... */
  #grow(): void {
    const held = this.#order.toArray();
    const keyOf = this.#table.keyOf;
    const keys = held.map((slot) => keyOf[slot]!);
    const times = held.map((slot) => this.#atMs[slot]!);
    const slots = 2 * this.#free.length;
    this.#table = new BlockKeyTable(slots);
    this.#order = new FreeBlockQueue(slots);
    this.#free = new Int32Array(slots);
    this.#atMs = new Float64Array(slots);
    keys.forEach((key, slot) => {
      this.#table.add(key, slot);
      this.#order.pushBack(slot);
      this.#atMs[slot] = times[slot]!;
    });
    this.#freeCount = 0;
    for (let slot = slots - 1; slot >= keys.length; slot--) this.#free[this.#freeCount++] = slot;
  }
}
