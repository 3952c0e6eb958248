/**
 * A replica's CPU tier of KV blocks: keys in LRU order, at most `capacityBlocks` of them (vLLM's
 * LRUOffloadingManager over a CPUBackend of `num_cpu_blocks`). Pure data: no clock, no I/O; the
 * offloading connector (src/engine/connector/offloading.ts) decides what goes in and comes out
 * and records the events. The block contents are not modelled: a key names its tokens.
 *
 * Each key sits in a slot: a chained table maps key -> slot (BlockKeyTable, which hashes the
 * 53-bit keys that a Map hashes slowly) and an intrusive doubly linked list over the slots keeps
 * the LRU order (FreeBlockQueue, least recent at the front), so a touch, a store, an eviction, a
 * take and a drop are each O(1). (A Map in insertion order found its oldest key by iterating
 * from its start, past every entry deleted since its last rehash: O(tier) per eviction once
 * the tier was full, which made a long run with a large tier ~20x slower than without.)
 * Slots are allocated as the tier fills, doubling up to `capacityBlocks`, so a large tier that
 * stays empty costs nothing.
 */
import type { BlockKey } from './blockKey.ts';
import { BlockKeyTable } from './blockKeyTable.ts';
import { FreeBlockQueue } from './freeBlockQueue.ts';

/** Slots allocated first (then doubled as the tier fills). */
const FIRST_SLOTS = 1024;

export class CpuTier {
  readonly capacityBlocks: number;
  /** Key -> slot; `keyOf[slot]` is the slot's key. */
  #table: BlockKeyTable;
  /** Slots holding a key, least recently stored first. */
  #lru: FreeBlockQueue;
  /** Slots holding no key, a stack of `#freeCount`. */
  #free: Int32Array;
  #freeCount = 0;
  /** Blocks written into the tier so far, and blocks read back out. */
  storedBlocks = 0;
  loadedBlocks = 0;
  evictedBlocks = 0;

  constructor(capacityBlocks: number) {
    if (!Number.isInteger(capacityBlocks) || capacityBlocks < 0) {
      throw new RangeError(`capacityBlocks must be an integer >= 0, got ${capacityBlocks}`);
    }
    this.capacityBlocks = capacityBlocks;
    const slots = Math.min(capacityBlocks, FIRST_SLOTS);
    this.#table = new BlockKeyTable(slots);
    this.#lru = new FreeBlockQueue(slots);
    this.#free = new Int32Array(slots);
    this.#freeAll(slots);
  }

  get size(): number {
    return this.#table.size;
  }

  has(key: BlockKey): boolean {
    return this.#table.has(key);
  }

  /**
   * Stores the keys not already held, evicting the least recent ones for room (appended to
   * `evicted`); a key already held becomes the most recent. Returns the keys written.
   */
  store(keys: readonly BlockKey[], evicted: BlockKey[]): BlockKey[] {
    const stored: BlockKey[] = [];
    if (this.capacityBlocks === 0) return stored;
    for (const key of keys) {
      const held = this.#table.get(key);
      if (held !== -1) {
        this.#lru.remove(held);
        this.#lru.pushBack(held);
        continue;
      }
      let slot: number;
      if (this.#table.size >= this.capacityBlocks) {
        slot = this.#lru.popFront();
        evicted.push(this.#table.keyOf[slot]!);
        this.#table.deleteBlock(slot);
        this.evictedBlocks++;
      } else {
        if (this.#freeCount === 0) this.#grow();
        slot = this.#free[--this.#freeCount]!;
      }
      this.#table.add(key, slot);
      this.#lru.pushBack(slot);
      stored.push(key);
      this.storedBlocks++;
    }
    return stored;
  }

  /** Takes `key` out to load it back into the GPU pool; false when the tier lacks it. */
  take(key: BlockKey): boolean {
    if (!this.drop(key)) return false;
    this.loadedBlocks++;
    return true;
  }

  /** Drops `key` without a load (the GPU computed the block again); false when not held. */
  drop(key: BlockKey): boolean {
    const slot = this.#table.get(key);
    if (slot === -1) return false;
    this.#table.deleteBlock(slot);
    this.#lru.remove(slot);
    this.#free[this.#freeCount++] = slot;
    return true;
  }

  /** Forgets every key (the engine's cache was reset). */
  clear(): void {
    const slots = this.#free.length;
    this.#table.clear();
    this.#lru = new FreeBlockQueue(slots);
    this.#freeAll(slots);
  }

  /** Keys held, least recent first; for tests and inspection. */
  keys(): BlockKey[] {
    const keyOf = this.#table.keyOf;
    return this.#lru.toArray().map((slot) => keyOf[slot]!);
  }

  /** Every one of `slots` slots free, the lowest on top. */
  #freeAll(slots: number): void {
    for (let i = 0; i < slots; i++) this.#free[i] = slots - 1 - i;
    this.#freeCount = slots;
  }

  /** Doubles the slots (at most capacityBlocks), keys moved in LRU order to slots 0, 1, ... */
  #grow(): void {
    const keys = this.keys();
    const slots = Math.min(this.capacityBlocks, Math.max(FIRST_SLOTS, 2 * this.#free.length));
    this.#table = new BlockKeyTable(slots);
    this.#lru = new FreeBlockQueue(slots);
    this.#free = new Int32Array(slots);
    keys.forEach((key, slot) => {
      this.#table.add(key, slot);
      this.#lru.pushBack(slot);
    });
    this.#freeCount = 0;
    for (let slot = slots - 1; slot >= keys.length; slot--) this.#free[this.#freeCount++] = slot;
  }
}
