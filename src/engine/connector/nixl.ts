/**
 * The NixlConnector modelled beside the block pool (vLLM's `NixlConnectorScheduler`): it moves a
 * prompt's blocks between engines and never enters the scheduler. No clock, no I/O: callers pass
 * `nowMs` and do the transport.
 *
 * Producer (prefill) side: a request that came with `do_remote_decode` keeps its prompt's blocks
 * when it finishes (`hold`): the connector takes a reference on each, so the pool cannot reuse
 * them, until the consumer says it pulled them (`release`) or the hold expires
 * (`VLLM_NIXL_ABORT_REQUEST_TIMEOUT`, 480 s in vLLM; `expire`). The timeout alone lets any client
 * fill the pool with holds (each lasts minutes), so holds are also bounded: `maxHeldBlocks` in all
 * and `maxHeldBlocksPerClient` per client (whoever the driver says sent the request); a hold past
 * either bound is not taken at all (`hold` returns null: the request is answered without params).
 *
 * Consumer (decode) side: once the blocks arrived (`inject`), the blocks of the prompt beyond the
 * local prefix cache are written into the pool and cached, as vLLM's scheduler caches them after
 * the load (BlockStored events), and held until the scheduler admits the request, whose prefix
 * lookup then finds them. They are computed tokens, not cache hits: `externalTokens` says how many
 * to take out of the hit counters. As in vLLM the last prompt token is always computed locally
 * (it samples the first output token), and so is a partial last block here.
 */
import type { BlockKey, KeyScope } from '../../kv/blockKey.ts';
import type { BlockPool } from '../../kv/blockPool.ts';
import { withDefaults } from '../../util/withDefaults.ts';

/** vLLM's VLLM_NIXL_ABORT_REQUEST_TIMEOUT default: 480 s. */
export const DEFAULT_ABORT_REQUEST_TIMEOUT_MS = 480_000;
/** Per-transfer latency (handshake and notification) when none is given. */
export const DEFAULT_TRANSFER_LATENCY_MS = 1;
/** Link bandwidth when none is given: 25 GB/s, a 200 Gb/s RDMA NIC. */
export const DEFAULT_TRANSFER_GBPS = 25;

/** Bounds on the blocks held for remote decodes: none (the simulator's fleet) by default. */
const UNBOUNDED = {
  maxHeldBlocks: Number.POSITIVE_INFINITY,
  maxHeldBlocksPerClient: Number.POSITIVE_INFINITY,
};

/** Bounds on the blocks held for remote decodes; absent: unbounded. */
export type HoldBounds = Partial<typeof UNBOUNDED>;

interface Held {
  blockIds: number[];
  client: string;
  /** Set by the first `expire` after the hold (the core has no clock; its driver does). */
  expiresAtMs: number | null;
}

interface Injected {
  blockIds: number[];
  externalTokens: number;
}

export class NixlConnectorCore {
  readonly #pool: BlockPool;
  readonly #abortTimeoutMs: number;
  readonly #held = new Map<string, Held>();
  readonly #injected = new Map<string, Injected>();
  readonly #bounds: Required<HoldBounds>;
  /** Blocks held, by client. */
  readonly #heldByClient = new Map<string, number>();
  /** Holds that expired before a pull (vLLM's `num_kv_expired_reqs`). */
  expiredHolds = 0;
  /** Holds not taken because they would pass a bound. */
  refusedHolds = 0;

  constructor(
    pool: BlockPool,
    abortTimeoutMs = DEFAULT_ABORT_REQUEST_TIMEOUT_MS,
    bounds: HoldBounds = {},
  ) {
    this.#pool = pool;
    this.#abortTimeoutMs = abortTimeoutMs;
    this.#bounds = withDefaults(UNBOUNDED, bounds);
  }

  /** Producer: blocks held for remote decodes, all requests together. */
  get heldBlocks(): number {
    let n = 0;
    for (const h of this.#held.values()) n += h.blockIds.length;
    return n;
  }

  get heldRequests(): number {
    return this.#held.size;
  }

  /** Consumer: blocks injected and not yet taken by the scheduler. */
  get injectedBlocks(): number {
    let n = 0;
    for (const i of this.#injected.values()) n += i.blockIds.length;
    return n;
  }

  /**
   * Producer: keeps the prompt's blocks of a finished request. The full blocks are the cached
   * ones (found by key, as the scheduler just released them); the rest (a partial last block,
   * or every block without prefix caching) are taken fresh, which holds the same room. Returns
   * the block ids held (the `remote_block_ids`), fewer when the pool has no room for the rest;
   * null, holding nothing, when the prompt's blocks would pass the total or the client's bound.
   */
  hold(
    requestId: string,
    blockKeys: readonly BlockKey[],
    promptTokens: number,
    client = '',
  ): number[] | null {
    this.release(requestId);
    const pool = this.#pool;
    const total = Math.ceil(promptTokens / pool.blockSize);
    const clientHeld = this.#heldByClient.get(client) ?? 0;
    const { maxHeldBlocks, maxHeldBlocksPerClient } = this.#bounds;
    if (this.heldBlocks + total > maxHeldBlocks || clientHeld + total > maxHeldBlocksPerClient) {
      this.refusedHolds++;
      return null;
    }
    const hit = pool.findCachedPrefix(blockKeys, blockKeys.length);
    const blockIds = [...hit.blockIds];
    pool.acquire(blockIds);
    const rest = Math.min(total - blockIds.length, pool.freeBlocks);
    if (rest > 0) pool.tryAllocate(rest, blockIds);
    this.#held.set(requestId, { blockIds, client, expiresAtMs: null });
    this.#heldByClient.set(client, clientHeld + blockIds.length);
    return blockIds;
  }

  /** Producer: the blocks of `requestId` if still held and matching `blockIds`. */
  isHeld(requestId: string, blockIds?: readonly number[]): boolean {
    const held = this.#held.get(requestId);
    if (!held) return false;
    if (!blockIds) return true;
    return (
      blockIds.length === held.blockIds.length && blockIds.every((b, i) => b === held.blockIds[i])
    );
  }

  /** Producer: the consumer pulled them (or the request ended): free them. False if not held. */
  release(requestId: string): boolean {
    const held = this.#held.get(requestId);
    if (!held) return false;
    this.#held.delete(requestId);
    this.#pool.release(held.blockIds);
    const left = (this.#heldByClient.get(held.client) ?? 0) - held.blockIds.length;
    if (left > 0) this.#heldByClient.set(held.client, left);
    else this.#heldByClient.delete(held.client);
    return true;
  }

  /**
   * Producer: frees the holds past their deadline and returns how many; a hold seen for the
   * first time gets its deadline, `nowMs` + the abort timeout (call it after every step).
   */
  expire(nowMs: number): number {
    let n = 0;
    for (const [id, held] of this.#held) {
      if (held.expiresAtMs === null) held.expiresAtMs = nowMs + this.#abortTimeoutMs;
      if (held.expiresAtMs > nowMs) continue;
      this.release(id);
      n++;
    }
    this.expiredHolds += n;
    return n;
  }

  /** The earliest deadline of a hold, null when none is held (a driver's next timer). */
  nextExpiryMs(): number | null {
    let next: number | null = null;
    for (const h of this.#held.values()) {
      const at = h.expiresAtMs;
      if (at !== null && (next === null || at < next)) next = at;
    }
    return next;
  }

  /**
   * Consumer: the pulled blocks arrived. Writes the prompt's full blocks beyond the local cached
   * prefix into the pool, caches them and holds them (and the local prefix) for the scheduler.
   * Returns the tokens injected (0 without prefix caching, whose pool cannot find them, or when
   * the pool has no room: the prompt is then computed here).
   */
  inject(
    requestId: string,
    blockKeys: readonly BlockKey[],
    tokenIds: ArrayLike<number>,
    scope: KeyScope,
  ): number {
    this.admitted(requestId);
    const pool = this.#pool;
    if (!pool.cachingEnabled) return 0;
    // As the scheduler: at least the last prompt token is computed here.
    const usable = Math.min(blockKeys.length, Math.floor((tokenIds.length - 1) / pool.blockSize));
    const hit = pool.findCachedPrefix(blockKeys, usable);
    const blockIds = [...hit.blockIds];
    const fresh = usable - blockIds.length;
    if (fresh <= 0 || fresh + hit.freeBlocks > pool.freeBlocks) return 0;
    pool.acquire(blockIds);
    const local = blockIds.length;
    pool.tryAllocate(fresh, blockIds);
    pool.cacheFullBlocks(blockIds, blockKeys, local, usable, tokenIds, scope);
    const externalTokens = fresh * pool.blockSize;
    this.#injected.set(requestId, { blockIds, externalTokens });
    return externalTokens;
  }

  /** Consumer: the scheduler took the request (or it ended): drop the connector's references. */
  admitted(requestId: string): number {
    const inj = this.#injected.get(requestId);
    if (!inj) return 0;
    this.#injected.delete(requestId);
    this.#pool.release(inj.blockIds);
    return inj.externalTokens;
  }
}

/**
 * Modelled pull time: KV bytes over the link plus one per-transfer latency.
 * `transferMs = latencyMs + tokens x kvBytesPerToken / (gbps x 1e9) x 1000`.
 */
export function transferMs(
  tokens: number,
  kvBytesPerToken: number,
  gbps: number,
  latencyMs: number,
): number {
  return latencyMs + (tokens * kvBytesPerToken) / (gbps * 1e6);
}
