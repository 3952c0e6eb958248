/**
 * A replica's CPU tier of KV blocks: keys in LRU order, at most `capacityBlocks` of them (vLLM's
 * LRUOffloadingManager over a CPUBackend of `num_cpu_blocks`). Pure data: no clock, no I/O; the
 * offloading connector (src/engine/connector/offloading.ts) decides what goes in and comes out
 * and records the events. The block contents are not modelled: a key names its tokens. The
 * order is a KeyLru (keyLru.ts): a store, an eviction, a take and a drop are O(1) each.
 */
import type { BlockKey } from './blockKey.ts';
import { KeyLru } from './keyLru.ts';

export class CpuTier {
  readonly capacityBlocks: number;
  /** Keys, least recently stored first. */
  readonly #keys: KeyLru;
  /** Blocks written into the tier so far, and blocks read back out. */
  storedBlocks = 0;
  loadedBlocks = 0;
  evictedBlocks = 0;

  constructor(capacityBlocks: number) {
    if (!Number.isInteger(capacityBlocks) || capacityBlocks < 0) {
      throw new RangeError(`capacityBlocks must be an integer >= 0, got ${capacityBlocks}`);
    }
    this.capacityBlocks = capacityBlocks;
    // One slot past the bound: a store adds its key before it evicts the oldest.
    this.#keys = new KeyLru(capacityBlocks + 1);
  }

  get size(): number {
    return this.#keys.size;
  }

  has(key: BlockKey): boolean {
    return this.#keys.has(key);
  }

  /**
   * Stores the keys not already held, evicting the least recent ones for room (appended to
   * `evicted`); a key already held becomes the most recent. Returns the keys written.
   */
  store(keys: readonly BlockKey[], evicted: BlockKey[]): BlockKey[] {
    const stored: BlockKey[] = [];
    if (this.capacityBlocks === 0) return stored;
    for (const key of keys) {
      // A held key only moves to the back; a new one goes there and, past the bound, the
      // oldest goes (never the new key itself: the bound is at least 1).
      if (!this.#keys.touch(key)) continue;
      if (this.#keys.size > this.capacityBlocks) {
        evicted.push(this.#keys.popOldest());
        this.evictedBlocks++;
      }
      stored.push(key);
      this.storedBlocks++;
    }
    return stored;
  }

  /** Takes `key` out to load it back into the GPU pool; false when the tier lacks it. */
  take(key: BlockKey): boolean {
    if (!this.#keys.delete(key)) return false;
    this.loadedBlocks++;
    return true;
  }

  /** Drops `key` without a load (the GPU computed the block again); false when not held. */
  drop(key: BlockKey): boolean {
    return this.#keys.delete(key);
  }

  /** Drops each of `keys` the tier holds (see `drop`): those keys, or null when it held none. */
  dropAll(keys: readonly BlockKey[]): BlockKey[] | null {
    let dropped: BlockKey[] | null = null;
    for (let i = 0; i < keys.length; i++) {
      if (this.#keys.delete(keys[i]!)) (dropped ??= []).push(keys[i]!);
    }
    return dropped;
  }

  /** Forgets every key (the engine's cache was reset). */
  clear(): void {
    this.#keys.clear();
  }

  /** Keys held, least recent first; for tests and inspection. */
  keys(): BlockKey[] {
    return this.#keys.keys();
  }
}
