/**
 * A replica's CPU tier of KV blocks: keys in LRU order, at most `capacityBlocks` of them (vLLM's
 * LRUOffloadingManager over a CPUBackend of `num_cpu_blocks`). Pure data: no clock, no I/O; the
 * offloading connector (src/engine/connector/offloading.ts) decides what goes in and comes out
 * and records the events. The block contents are not modelled: a key names its tokens.
 */
import type { BlockKey } from './blockKey.ts';

export class CpuTier {
  readonly capacityBlocks: number;
  /** Keys, least recently stored first (a Map keeps insertion order). */
  readonly #keys = new Map<BlockKey, true>();
  /** Blocks written into the tier so far, and blocks read back out. */
  storedBlocks = 0;
  loadedBlocks = 0;
  evictedBlocks = 0;

  constructor(capacityBlocks: number) {
    if (!Number.isInteger(capacityBlocks) || capacityBlocks < 0) {
      throw new RangeError(`capacityBlocks must be an integer >= 0, got ${capacityBlocks}`);
    }
    this.capacityBlocks = capacityBlocks;
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
      if (this.#keys.delete(key)) {
        this.#keys.set(key, true);
        continue;
      }
      if (this.#keys.size >= this.capacityBlocks) {
        const oldest = this.#keys.keys().next().value as BlockKey;
        this.#keys.delete(oldest);
        evicted.push(oldest);
        this.evictedBlocks++;
      }
      this.#keys.set(key, true);
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

  /** Forgets every key (the engine's cache was reset). */
  clear(): void {
    this.#keys.clear();
  }

  /** Keys held, least recent first; for tests and inspection. */
  keys(): BlockKey[] {
    return [...this.#keys.keys()];
  }
}
