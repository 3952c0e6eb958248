/**
 * Owner release: whether a queued request may leave the flow queue now, judged on the replicas
 * that would take it rather than on the pool as a whole.
 *
 * Releasing on pool-wide room alone sends a request to whichever replica has room, rarely the
 * one that caches its prefix: it prefills cold, the fleet's throughput falls, and everyone waits
 * longer (docs/flow-control.md). Here a request is ready when the replicas with room cache
 * nearly as much of its prompt as the best replica does:
 *
 *   best     = max cached prompt tokens over the eligible replicas
 *   withRoom = max cached prompt tokens over the replicas with room
 *   ready    = withRoom >= best - slackTokens     (its cache owner has room, or one nearly as good)
 *              or it has waited holdMs already    (nothing waits for its owner forever)
 *
 * A request that caches nothing anywhere is ready wherever there is room. Cached tokens are the
 * router's view (its index, as `route` matches it); the prefill a miss costs is what the router's
 * cost rule prices, so the slack is in the same unit. Pure: the caller supplies both views.
 */
import type { ReadyVerdict } from './flowQueue.ts';

/**
 * When a queued request may leave: `room`, whenever some replica has room (llm-d's rule);
 * `owner`, by `ownerReady` below.
 */
export const FLOW_RELEASES = ['room', 'owner'] as const;
export type FlowRelease = (typeof FLOW_RELEASES)[number];
/** Owner release: a replica with room may cache this many prompt tokens fewer than the best. */
export const DEFAULT_OWNER_SLACK_TOKENS = 1024;
/**
 * Owner release: after this wait a request goes wherever there is room. 400 ms with the warm
 * pass (`DEFAULT_OWNER_PASS_MS`): in the acceptance experiment the light tenant's TTFT p99 was
 * 1.92x to 1.97x its unloaded value on seeds 1 to 5, against 2.01x to 2.98x with 500 ms and no
 * pass (docs/flow-control.md).
 */
export const DEFAULT_OWNER_HOLD_MS = 400;
/** Owner release: how deep into each tenant's queue a ready request is looked for. */
export const DEFAULT_LOOK_AHEAD = 16;
/**
 * Owner release: a request that goes warm passes earlier ones of its tenant that would go cold
 * while they have waited less than this (`mayPassWithin`); 0 turns it off. Well under the
 * time a backlogged tenant's requests wait, so that its queue stays FIFO among the ready ones
 * (without the bound the fleet fills with its warm work: 4.5x to 6x in the experiment).
 */
export const DEFAULT_OWNER_PASS_MS = 2000;

/**
 * What a dispatched request costs its tenant in the fair share: `prompt`, its prompt tokens;
 * `uncached`, the prompt tokens the warmest replica with room does not cache (`uncachedCharge`).
 */
export const FLOW_CHARGES = ['prompt', 'uncached'] as const;
export type FlowCharge = (typeof FLOW_CHARGES)[number];
/**
 * Uncached charging: in the acceptance experiment, with sparse finish-first, it took the light
 * tenant's TTFT p99 from 2.27-2.49x its unloaded value to about 2x (docs/flow-control.md).
 * The simulator's default, and the gateway's and the picker's, so that the one predicts the others.
 */
export const DEFAULT_FLOW_CHARGE: FlowCharge = 'uncached';
/** Owner release: a sparse tenant's request goes where it finishes first (`finishFirstReplica`). */
export const DEFAULT_SPARSE_FINISH_FIRST = true;

/** Owner release's defaults in one piece, as the gateway's and the picker's config reads them. */
export const OWNER_RELEASE_DEFAULTS = {
  ownerSlackTokens: DEFAULT_OWNER_SLACK_TOKENS,
  ownerHoldMs: DEFAULT_OWNER_HOLD_MS,
  lookAhead: DEFAULT_LOOK_AHEAD,
  ownerPassMs: DEFAULT_OWNER_PASS_MS,
  sparseFinishFirst: DEFAULT_SPARSE_FINISH_FIRST,
  charge: DEFAULT_FLOW_CHARGE,
} as const;

export interface OwnerReleaseOptions {
  /** Cached prompt tokens a replica with room may lack against the best one (>= 0). */
  slackTokens: number;
  /** After this wait a request is ready wherever there is room (>= 0). */
  holdMs: number;
}

/**
 * `cachedTokens[i]` is what replica i caches of the prompt; `eligible[i]` whether it may be
 * routed to at all, `room[i]` whether it has room (implies eligible).
 */
export function ownerReady(
  cachedTokens: ArrayLike<number>,
  eligible: readonly boolean[],
  room: readonly boolean[],
  waitedMs: number,
  options: OwnerReleaseOptions,
): boolean {
  let best = 0;
  let withRoom = -1;
  for (let i = 0; i < eligible.length; i++) {
    if (!eligible[i]) continue;
    const cached = cachedTokens[i] ?? 0;
    if (cached > best) best = cached;
    if (room[i] && cached > withRoom) withRoom = cached;
  }
  if (withRoom < 0) return false;
  if (waitedMs >= options.holdMs) return true;
  return withRoom >= best - options.slackTokens;
}

/**
 * `ownerReady`'s verdict with the reason kept: 'preferred' when a replica with room caches the
 * prompt within the slack of the best one (it goes warm), true when only its hold made it ready
 * (it goes cold), false when it is not ready. `FlowQueue.dequeue` lets a 'preferred' request
 * pass the ready ones of its tenant ahead of it, within `ownerPassMs` (`mayPassWithin`).
 */
export function ownerVerdict(
  cachedTokens: ArrayLike<number>,
  eligible: readonly boolean[],
  room: readonly boolean[],
  waitedMs: number,
  options: OwnerReleaseOptions,
): ReadyVerdict {
  if (!ownerReady(cachedTokens, eligible, room, waitedMs, options)) return false;
  const warm = ownerReady(cachedTokens, eligible, room, 0, {
    slackTokens: options.slackTokens,
    holdMs: Number.POSITIVE_INFINITY,
  });
  return warm ? 'preferred' : true;
}

/**
 * Owner release's FIFO bound inside a tenant: a request that goes warm ('preferred') may pass
 * an earlier request of its tenant that is ready only by its hold while that one has waited
 * less than `passMs` (0: never). A backlogged tenant's requests have all waited longer, so its
 * queue stays FIFO among the ready ones and the fleet does not fill with its warm work; a
 * tenant whose queue is short keeps its warm requests off the cold path.
 */
export function mayPassWithin(
  nowMs: number,
  passMs: number,
): (item: { arrivedMs: number }) => boolean {
  return (item) => nowMs - item.arrivedMs < passMs;
}

/** What finish-first dispatch reads of each replica (`finishFirstReplica`). */
export interface FinishFirstReplica {
  eligible: boolean;
  /** Has room now (`hasGoodCapacity` at the flow limits). */
  room: boolean;
  /** Within the limits other than queued prefill (waiting requests, KV usage). */
  openBesidesPrefill: boolean;
  /** Prefill the router has queued there, ms. */
  queuedPrefillMs: number;
  /** The replica's prefill price, ms per prompt token it does not cache. */
  prefillMsPerToken: number;
}

/**
 * Finish-first dispatch for a request whose tenant has nothing else queued (a sparse tenant, as
 * FQ-CoDel's sparse flows, RFC 8290 section 4.1): rather than wait up to the hold for its cache
 * owner to regain room, it goes at once to the replica where its prefill is estimated to end
 * first,
 *
 *   finishMs(i) = queuedPrefillMs(i) + (promptTokens - cachedTokens(i)) * prefillMsPerToken(i)
 *
 * over the replicas with room and the prompt's owners (caching within `slackTokens` of the best,
 * something at all) that pass every limit but the queued prefill. Returns that replica when it
 * has room; -1 when the best is an owner without room (wait for it, as owner release does) or
 * no replica qualifies. A tenant with a backlog waits in the queue anyway, so for it the cache
 * (the fleet's throughput) comes first: this is for the request whose latency is at stake.
 */
export function finishFirstReplica(
  cachedTokens: ArrayLike<number>,
  promptTokens: number,
  replicas: readonly FinishFirstReplica[],
  slackTokens: number,
): number {
  let best = 0;
  for (let i = 0; i < replicas.length; i++) {
    if (replicas[i]!.eligible) best = Math.max(best, cachedTokens[i] ?? 0);
  }
  let at = -1;
  let atMs = Number.POSITIVE_INFINITY;
  for (let i = 0; i < replicas.length; i++) {
    const r = replicas[i]!;
    if (!r.eligible) continue;
    const cached = Math.min(cachedTokens[i] ?? 0, promptTokens);
    const owner = cached > 0 && cached >= best - slackTokens && r.openBesidesPrefill;
    if (!r.room && !owner) continue;
    const finishMs = r.queuedPrefillMs + (promptTokens - cached) * r.prefillMsPerToken;
    if (finishMs < atMs || (finishMs === atMs && r.room && !replicas[at]!.room)) {
      atMs = finishMs;
      at = i;
    }
  }
  return at >= 0 && replicas[at]!.room ? at : -1;
}

/**
 * What a request dispatched now costs its tenant in the fair share, `uncached` charging: the
 * prompt tokens the warmest replica with room does not cache (at least 1), the prefill the
 * fleet does for it. A tenant whose prompts are served from cache pays for what it uses; one
 * sent cold pays for the cold prefill.
 */
export function uncachedCharge(
  cachedTokens: ArrayLike<number>,
  room: readonly boolean[],
  promptTokens: number,
): number {
  let cached = 0;
  for (let i = 0; i < room.length; i++)
    if (room[i]) cached = Math.max(cached, cachedTokens[i] ?? 0);
  return Math.max(1, promptTokens - Math.min(cached, promptTokens));
}
