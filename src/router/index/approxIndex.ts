/**
 * Approximate prefix index: the router's record of which blocks it sent to which replica, with
 * a per-replica capacity in blocks and LRU forgetting, standing in for the engine's eviction.
 * Keys of one request are touched last block first, so the shared root of a chain is the most
 * recently used and the unique tail is forgotten first (vLLM frees a finished request's blocks
 * in the same order). Engine events are ignored: this mode is for engines that publish none.
 *
 * A replica's GPU record can be sized to its engine's pool (`setGpuCapacity`). A replica told its
 * CPU tier's size (`setCpuCapacity`, in blocks; vLLM's OffloadingConnector)
 * gets a modelled tier beside its modelled GPU pool, as the engine keeps one
 * (src/engine/connector/offloading.ts): a block aged out of the GPU capacity enters the tier as
 * its most recent block, the tier's least recent one falling out when it is full; a route that
 * asks for a block the tier holds reloads it (it leaves the tier for the GPU record). So a block
 * is in at most one modelled tier of a replica, and `cpuBlocks` is what the tier match
 * (tierMatch.ts) credits as CPU hits. A replica never told stays GPU-only.
 *
 * How it forgets can be a peer router's (approxForgetting.ts): a capacity enforced only by a
 * periodic sweep (SGLang's router), a time to live per block (Dynamo), a trim below the capacity
 * (Dynamo's prune ratio). Time is the caller's: `recordRoute` and `forget` take `nowMs`. Without
 * a sweep or a TTL the index is the plain LRU above and never reads the time.
 */
import type { BlockKey } from '../../kv/blockKey.ts';
import type { KvEvent } from '../../kv/events.ts';
import { KeyLru } from '../../kv/keyLru.ts';
import { type ApproxForgetting, lruForgetting } from './approxForgetting.ts';
import { BlockIndex } from './blockIndex.ts';
import type { IndexMode } from '../defaults.ts';
import type { PrefixIndex } from './prefixIndex.ts';
import { TierKeys } from './tierKeys.ts';

/** One Llama 3.3 70B TP=2 H200 replica's KV pool: 558,124 tokens / 16 tokens per block. */
export const DEFAULT_APPROX_CAPACITY_BLOCKS = 34_882;

export class ApproxIndex implements PrefixIndex {
  readonly mode: IndexMode = 'approx';
  readonly blocks: BlockIndex;
  /** Blocks in each replica's modelled CPU tier; empty for a replica without one. */
  readonly cpuBlocks: TierKeys;
  readonly capacityBlocks: number;
  /** Sweep, TTL and trim ratio (capacity: `capacityBlocks`, or a replica's own GPU size). */
  readonly forgetting: ApproxForgetting;
  /**
   * Per replica, keys in least- to most-recently-used order (O(1) evictions: keyLru.ts), each
   * with the time it was last routed (0 when the caller gives none).
   */
  #lru: KeyLru[] = [];
  /** When the next periodic sweep is due (forgetting.sweepMs > 0). */
  #nextSweepMs: number;
  /** Per replica, the modelled CPU tier's keys, least recently stored first. */
  #cpuLru: KeyLru[] = [];
  /** Per replica, the CPU tier's size in blocks (0: none). */
  #cpuCapacity: number[] = [];
  /** Per replica, the GPU record's size in blocks (default `capacityBlocks`). */
  #gpuCapacity: number[] = [];

  constructor(
    replicaCount: number,
    capacityBlocks = DEFAULT_APPROX_CAPACITY_BLOCKS,
    expectedKeys = 0,
    forgetting?: ApproxForgetting,
  ) {
    // A peer's forgetting brings its own capacity.
    this.forgetting = forgetting ?? lruForgetting(capacityBlocks);
    this.capacityBlocks = this.forgetting.capacityBlocks;
    this.#nextSweepMs = this.forgetting.sweepMs;
    this.blocks = new BlockIndex(replicaCount, expectedKeys);
    this.cpuBlocks = new TierKeys(replicaCount);
    this.ensureReplicas(replicaCount);
  }

  ensureReplicas(count: number): void {
    this.blocks.ensureReplicas(count);
    this.cpuBlocks.ensureReplicas(count);
    while (this.#lru.length < count) {
      this.#lru.push(new KeyLru());
      this.#cpuLru.push(new KeyLru());
      this.#cpuCapacity.push(0);
      this.#gpuCapacity.push(this.capacityBlocks);
    }
  }

  /**
   * Gives `replica` a modelled CPU tier of `blocks` blocks (0: none); a smaller size than its
   * tier holds drops the least recent blocks.
   */
  setCpuCapacity(replica: number, blocks: number): void {
    if (!Number.isInteger(blocks) || blocks < 0) {
      throw new RangeError(`CPU tier blocks must be an integer >= 0, got ${blocks}`);
    }
    this.ensureReplicas(replica + 1);
    this.#cpuCapacity[replica] = blocks;
    this.#trimCpu(replica);
  }

  cpuCapacity(replica: number): number {
    return this.#cpuCapacity[replica] ?? 0;
  }

  /**
   * Sizes `replica`'s GPU record to its engine's pool, `blocks` >= 1 (default `capacityBlocks`);
   * takes effect at its next route.
   */
  setGpuCapacity(replica: number, blocks: number): void {
    if (!Number.isInteger(blocks) || blocks < 1) {
      throw new RangeError(`GPU blocks must be an integer >= 1, got ${blocks}`);
    }
    this.ensureReplicas(replica + 1);
    this.#gpuCapacity[replica] = blocks;
  }

  gpuCapacity(replica: number): number {
    return this.#gpuCapacity[replica] ?? this.capacityBlocks;
  }

  applyEvents(_replica: number, _events: readonly KvEvent[]): number {
    return 0;
  }

  recordRoute(replica: number, keys: readonly BlockKey[], nowMs = 0): void {
    const lru = this.#lru[replica]!;
    const cpu = this.#cpuLru[replica]!;
    for (let i = keys.length - 1; i >= 0; i--) {
      const key = keys[i]!;
      if (!lru.touch(key, nowMs)) continue;
      // Reloaded from the CPU tier, or computed: on the GPU now, and only there.
      if (cpu.size > 0 && cpu.delete(key)) this.cpuBlocks.remove(key, replica);
      this.blocks.add(key, replica);
    }
    // With a periodic sweep the record grows past its capacity until the sweep (forget).
    if (this.forgetting.sweepMs === 0) this.#trim(replica);
  }

  /**
   * Forgets what is due at `nowMs`: blocks past their time to live, and, when a periodic sweep
   * is due, each replica's record down to its capacity. Call before reading `blocks`; a no-op
   * without a TTL or a sweep.
   */
  forget(nowMs: number): void {
    const { ttlMs, sweepMs } = this.forgetting;
    if (ttlMs > 0) {
      for (let r = 0; r < this.#lru.length; r++) this.#expire(r, nowMs - ttlMs);
    }
    if (sweepMs > 0 && nowMs >= this.#nextSweepMs) {
      for (let r = 0; r < this.#lru.length; r++) this.#trim(r);
      // The sweeper wakes every sweepMs: the next wake-up after now.
      this.#nextSweepMs += Math.floor((nowMs - this.#nextSweepMs) / sweepMs + 1) * sweepMs;
    }
  }

  /** Blocks last routed at or before `cutoffMs` are forgotten (not kept in a CPU tier). */
  #expire(replica: number, cutoffMs: number): void {
    const lru = this.#lru[replica]!;
    while (lru.size > 0 && lru.oldestAtMs() <= cutoffMs) {
      this.blocks.remove(lru.popOldest(), replica);
    }
  }

  /** Past its capacity, the least recent blocks go (to the CPU tier when it has one). */
  #trim(replica: number): void {
    const lru = this.#lru[replica]!;
    const cpu = this.#cpuLru[replica]!;
    const cpuCapacity = this.#cpuCapacity[replica]!;
    const gpuCapacity = this.#gpuCapacity[replica]!;
    if (lru.size <= gpuCapacity) return;
    const keep = Math.floor(gpuCapacity * this.forgetting.trimToRatio);
    while (lru.size > keep) {
      const oldest = lru.popOldest();
      this.blocks.remove(oldest, replica);
      if (cpuCapacity > 0) {
        cpu.addIfAbsent(oldest);
        this.cpuBlocks.add(oldest, replica);
      }
    }
    if (cpu.size > cpuCapacity) this.#trimCpu(replica);
  }

  /** The tier's least recent blocks fall out while it holds more than its size. */
  #trimCpu(replica: number): void {
    const cpu = this.#cpuLru[replica]!;
    const capacity = this.#cpuCapacity[replica]!;
    while (cpu.size > capacity) this.cpuBlocks.remove(cpu.popOldest(), replica);
  }

  clearReplica(replica: number): void {
    this.#lru[replica]?.clear();
    this.#cpuLru[replica]?.clear();
    this.blocks.clearReplica(replica);
    this.cpuBlocks.clearReplica(replica);
  }

  blockCount(replica: number): number {
    return this.blocks.blockCount(replica);
  }

  cpuBlockCount(replica: number): number {
    return this.cpuBlocks.blockCount(replica);
  }
}
