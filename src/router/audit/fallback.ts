/**
 * One replica's approximate record while its KV events are not trusted (the audit found them
 * over-predicting and a replay did not mend them): the blocks the router sent there, in the
 * shared prefix index's bits for that replica, forgotten in LRU order beyond the engine's pool
 * size, as `ApproxIndex` does for a whole fleet. The other replicas' bits are untouched.
 */
import type { BlockKey } from '../../kv/blockKey.ts';
import type { BlockIndex } from '../index/blockIndex.ts';

export class ApproxFallback {
  readonly capacityBlocks: number;
  readonly #blocks: BlockIndex;
  readonly #replica: number;
  /** Keys in least- to most-recently-used order. */
  readonly #lru = new Map<BlockKey, true>();

  constructor(blocks: BlockIndex, replica: number, capacityBlocks: number) {
    if (!Number.isInteger(capacityBlocks) || capacityBlocks < 1) {
      throw new RangeError(`capacityBlocks must be an integer >= 1, got ${capacityBlocks}`);
    }
    this.#blocks = blocks;
    this.#replica = replica;
    this.capacityBlocks = capacityBlocks;
  }

  /** The request's keys were sent there: touched last block first (its tail forgotten first). */
  recordRoute(keys: readonly BlockKey[]): void {
    const lru = this.#lru;
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i]!;
      if (lru.delete(key)) lru.set(key, true);
      else {
        lru.set(key, true);
        this.#blocks.add(key, this.#replica);
      }
    }
    while (lru.size > this.capacityBlocks) {
      const oldest = lru.keys().next().value as BlockKey;
      lru.delete(oldest);
      this.#blocks.remove(oldest, this.#replica);
    }
  }

  /** Forgets every block recorded (the replica restarted, or events are trusted again). */
  clear(): void {
    this.#lru.clear();
    this.#blocks.clearReplica(this.#replica);
  }

  get size(): number {
    return this.#lru.size;
  }
}
