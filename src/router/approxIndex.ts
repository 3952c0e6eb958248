/**
 * Approximate prefix index: the router's record of which blocks it sent to which replica, with
 * a per-replica capacity in blocks and LRU forgetting, standing in for the engine's eviction.
 * Keys of one request are touched last block first, so the shared root of a chain is the most
 * recently used and the unique tail is forgotten first (vLLM frees a finished request's blocks
 * in the same order). Engine events are ignored: this mode is for engines that publish none.
 */
import type { BlockKey } from '../kv/blockKey.ts';
import type { KvEvent } from '../kv/events.ts';
import { BlockIndex } from './blockIndex.ts';
import type { IndexMode } from './defaults.ts';
import type { PrefixIndex } from './prefixIndex.ts';

/** One Llama 3.3 70B TP=2 H200 replica's KV pool: 558,124 tokens / 16 tokens per block. */
export const DEFAULT_APPROX_CAPACITY_BLOCKS = 34_882;

export class ApproxIndex implements PrefixIndex {
  readonly mode: IndexMode = 'approx';
  readonly blocks: BlockIndex;
  readonly capacityBlocks: number;
  /** Per replica, keys in least- to most-recently-used order (Map keeps insertion order). */
  #lru: Map<BlockKey, true>[] = [];

  constructor(
    replicaCount: number,
    capacityBlocks = DEFAULT_APPROX_CAPACITY_BLOCKS,
    expectedKeys = 0,
  ) {
    this.capacityBlocks = capacityBlocks;
    this.blocks = new BlockIndex(replicaCount, expectedKeys);
    this.ensureReplicas(replicaCount);
  }

  ensureReplicas(count: number): void {
    this.blocks.ensureReplicas(count);
    while (this.#lru.length < count) this.#lru.push(new Map());
  }

  applyEvents(_replica: number, _events: readonly KvEvent[]): number {
    return 0;
  }

  recordRoute(replica: number, keys: readonly BlockKey[]): void {
    const lru = this.#lru[replica]!;
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i]!;
      if (lru.delete(key)) lru.set(key, true);
      else {
        lru.set(key, true);
        this.blocks.add(key, replica);
      }
    }
    while (lru.size > this.capacityBlocks) {
      const oldest = lru.keys().next().value as BlockKey;
      lru.delete(oldest);
      this.blocks.remove(oldest, replica);
    }
  }

  clearReplica(replica: number): void {
    this.#lru[replica]?.clear();
    this.blocks.clearReplica(replica);
  }

  blockCount(replica: number): number {
    return this.blocks.blockCount(replica);
  }
}
