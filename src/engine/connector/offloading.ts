/**
 * vLLM's OffloadingConnector modelled beside the block pool: a CPU tier that keeps the blocks
 * the GPU pool evicts and loads a request's prefix back from it instead of recomputing it. It
 * never enters the scheduler; like the NixlConnector it writes blocks into the pool before the
 * scheduler looks, whose prefix lookup then finds them. No clock, no I/O.
 *
 * - Store: the pool itself moves a cached block it evicts into its tier (BlockPool, `cpuBlocks`),
 *   the tier's least recent blocks making room (vLLM's LRU policy). vLLM offloads every computed
 *   block as soon as it is full, so its tier also holds blocks the GPU still has; here the tier
 *   holds a block only once the GPU dropped it, so a block lives in at most one tier of a
 *   replica and a CPU tier of N blocks adds N blocks to the replica's cache.
 * - Load: at `add`, and again before each step for the oldest requests not yet admitted whose
 *   load found no free room in the pool (once the pool has as many free blocks as it lacked),
 *   the prompt's blocks
 *   after its GPU-cached prefix that the tier holds, as one run, are written into the pool as
 *   cached free blocks, the most recent ones (so the request's admission finds them, unless the
 *   pool evicts them again first), and leave the tier. The
 *   transfer time, tokens x KV bytes per token over `cpuKvGbps`, is added to the next step (as
 *   an adapter load is): every running request feels it, which is conservative against vLLM's
 *   asynchronous loads. At least the last prompt token is computed, as the scheduler does.
 * - Events, in vLLM's fields (vllm/distributed/kv_events.py, vllm/v1/kv_offload/mediums.py):
 *   the tier's stores and removals are BlockStored / BlockRemoved with medium "CPU", a store
 *   naming blocks by hash only (no tokens, no parent), as OffloadingConnectorScheduler's
 *   take_events builds them; a block's CPU store comes before its GPU removal (vLLM offloads
 *   before the GPU evicts), so a consumer that maps hashes to keys still knows it. A block the
 *   GPU computes again while the tier has it leaves the tier (a CPU removal after its store).
 * - Hit counts, as vLLM's scheduler keeps them (vllm/v1/core/sched/scheduler.py, `schedule`):
 *   tokens the tier supplied are the connector's hits, not the GPU prefix cache's. At a
 *   request's first admission `admitted` gives its external hits, the blocks loaded for it that
 *   its admitted prefix covers, and its external queries, its prompt less its GPU-cached part.
 */
import type { BlockKey, KeyScope } from '../../kv/blockKey.ts';
import type { BlockPool } from '../../kv/blockPool.ts';
import type { CpuTier } from '../../kv/cpuTier.ts';
import type { KvEvent } from '../../kv/events.ts';

/**
 * PCIe 5.0 x16, one direction: 32 GT/s x 16 lanes x 128/130 (encoding) / 8 = 63.0 GB/s
 * (PCI-SIG's PCIe 5.0 signalling rate). What a host-to-GPU KV copy gets at best.
 */
export const DEFAULT_CPU_KV_GBPS = 63;

/** `ms = tokens x kvBytesPerToken / (gbps x 1e9) x 1000`. */
export function cpuReloadMs(tokens: number, kvBytesPerToken: number, gbps: number): number {
  return (tokens * kvBytesPerToken) / (gbps * 1e6);
}

/** Requests waiting for admission whose loads are retried before each step, oldest first. */
export const LOAD_RETRIES_PER_STEP = 4;

interface Pending {
  blockKeys: readonly BlockKey[];
  tokenIds: ArrayLike<number>;
  scope: KeyScope;
  /** Free blocks the last attempt needed and did not have. */
  needBlocks: number;
}

/** A request's blocks loaded from the tier so far, [fromBlock, toBlock), and its prompt length. */
interface Loaded {
  promptTokens: number;
  fromBlock: number;
  toBlock: number;
}

/** A request's first admission, as vLLM's connector prefix-cache stats record it (tokens). */
export interface ExternalHit {
  queriesTokens: number;
  hitsTokens: number;
}

/** What one load attempt did: tokens loaded, or the free blocks it lacked room for. */
interface LoadOutcome {
  tokens: number;
  needBlocks: number;
  /** Blocks loaded, [fromBlock, toBlock) of the prompt (empty when none). */
  fromBlock: number;
  toBlock: number;
}

export class OffloadingConnectorCore {
  readonly #pool: BlockPool;
  readonly kvBytesPerToken: number;
  readonly #gbps: number;
  #events: KvEvent[] = [];
  #pendingMs = 0;
  /** Requests not admitted yet whose load lacked room, in arrival order. */
  readonly #waiting = new Map<string, Pending>();
  /** Requests added and not admitted yet: what was loaded for each. */
  readonly #requests = new Map<string, Loaded>();
  /** Prompt tokens loaded back from the tier so far. */
  loadedTokens = 0;

  /** `pool`: one made with the tier's `cpuBlocks`, which stores and evicts its blocks. */
  constructor(pool: BlockPool, kvBytesPerToken: number, gbps: number) {
    this.#pool = pool;
    this.kvBytesPerToken = kvBytesPerToken;
    this.#gbps = gbps;
  }

  get tier(): CpuTier {
    return this.#pool.cpuTier;
  }

  /** A request arrived: loads what the tier has of its prefix, and again later until admitted. */
  add(id: string, blockKeys: readonly BlockKey[], tokenIds: ArrayLike<number>, scope: KeyScope) {
    const out = this.#tryLoad(blockKeys, tokenIds, scope);
    this.#requests.set(id, {
      promptTokens: tokenIds.length,
      fromBlock: out.fromBlock,
      toBlock: out.toBlock,
    });
    if (out.needBlocks > 0) {
      this.#waiting.set(id, { blockKeys, tokenIds, scope, needBlocks: out.needBlocks });
    }
  }

  /** Before a step: retries the oldest loads that lacked room, once the pool has it. */
  retryWaiting(): void {
    if (this.#waiting.size === 0) return;
    let n = 0;
    for (const [id, w] of this.#waiting) {
      if (n++ === LOAD_RETRIES_PER_STEP) break;
      if (this.#pool.freeBlocks < w.needBlocks) continue;
      const out = this.#tryLoad(w.blockKeys, w.tokenIds, w.scope);
      const loaded = this.#requests.get(id);
      if (loaded && out.toBlock > out.fromBlock) {
        if (loaded.toBlock === loaded.fromBlock) loaded.fromBlock = out.fromBlock;
        else loaded.fromBlock = Math.min(loaded.fromBlock, out.fromBlock);
        loaded.toBlock = Math.max(loaded.toBlock, out.toBlock);
      }
      if (out.needBlocks > 0) w.needBlocks = out.needBlocks;
      else this.#waiting.delete(id);
    }
  }

  /**
   * The request was admitted with `cachedTokens` from the prefix cache (or ended: undefined):
   * no more loads for it. At its first admission, its external queries and hits (ExternalHit);
   * null after that, or when it ended unadmitted.
   */
  admitted(id: string, cachedTokens?: number): ExternalHit | null {
    this.#waiting.delete(id);
    const loaded = this.#requests.get(id);
    if (loaded === undefined) return null;
    this.#requests.delete(id);
    if (cachedTokens === undefined) return null;
    const bs = this.#pool.blockSize;
    const cachedBlocks = Math.floor(cachedTokens / bs);
    const hitBlocks = Math.max(0, Math.min(loaded.toBlock, cachedBlocks) - loaded.fromBlock);
    const hitsTokens = Math.min(cachedTokens, hitBlocks * bs);
    return { queriesTokens: loaded.promptTokens - (cachedTokens - hitsTokens), hitsTokens };
  }

  /**
   * Loads the run of `blockKeys` after the GPU-cached prefix that the tier holds into the pool:
   * the tokens loaded, or (tokens 0) the free blocks it needed and the pool lacked.
   */
  #tryLoad(
    blockKeys: readonly BlockKey[],
    tokenIds: ArrayLike<number>,
    scope: KeyScope,
  ): LoadOutcome {
    const pool = this.#pool;
    const none = { tokens: 0, needBlocks: 0, fromBlock: 0, toBlock: 0 };
    if (!pool.cachingEnabled || pool.cpuTier.size === 0) return none;
    const usable = Math.min(blockKeys.length, Math.floor((tokenIds.length - 1) / pool.blockSize));
    const prefix = pool.tieredPrefix(blockKeys, usable);
    const local = prefix.gpuBlocks;
    const end = prefix.cpuEnd;
    const fresh = end - local;
    if (fresh === 0) return none;
    if (fresh + prefix.gpuFreeBlocks > pool.freeBlocks) {
      return { tokens: 0, needBlocks: fresh + prefix.gpuFreeBlocks, fromBlock: 0, toBlock: 0 };
    }
    const hit = pool.findCachedPrefix(blockKeys, local);
    this.#drain();
    const taken = blockKeys.slice(local, end);
    for (const key of taken) pool.takeFromCpuTier(key);
    const blockIds = [...hit.blockIds];
    pool.acquire(blockIds);
    pool.tryAllocate(fresh, blockIds);
    pool.cacheFullBlocks(blockIds, blockKeys, local, end, tokenIds, scope);
    // Released at once: cached free blocks, the head of the prompt the most recent.
    pool.release(blockIds);
    this.#drain();
    this.#events.push({ type: 'BlockRemoved', blockKeys: taken, medium: 'CPU' });
    const tokens = fresh * pool.blockSize;
    this.loadedTokens += tokens;
    this.#pendingMs += cpuReloadMs(tokens, this.kvBytesPerToken, this.#gbps);
    return { tokens, needBlocks: 0, fromBlock: local, toBlock: end };
  }

  /** Transfer time of the loads since the last call (the next step carries it). */
  takePendingMs(): number {
    const ms = this.#pendingMs;
    this.#pendingMs = 0;
    return ms;
  }

  /** The pool's events with the tier's, in order; drains both. */
  takeEvents(): KvEvent[] {
    this.#drain();
    const events = this.#events;
    if (events.length === 0) return [];
    this.#events = [];
    return events;
  }

  /** Moves the pool's events (its tier's among them) into the connector's list. */
  #drain(): void {
    for (const event of this.#pool.takeEvents()) this.#events.push(event);
  }
}
