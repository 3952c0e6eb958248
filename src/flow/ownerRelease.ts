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

/**
 * When a queued request may leave: `room`, whenever some replica has room (llm-d's rule);
 * `owner`, by `ownerReady` below.
 */
export const FLOW_RELEASES = ['room', 'owner'] as const;
export type FlowRelease = (typeof FLOW_RELEASES)[number];
/** Owner release: a replica with room may cache this many prompt tokens fewer than the best. */
export const DEFAULT_OWNER_SLACK_TOKENS = 1024;
/** Owner release: after this wait a request goes wherever there is room. */
export const DEFAULT_OWNER_HOLD_MS = 500;
/** Owner release: how deep into each tenant's queue a ready request is looked for. */
export const DEFAULT_LOOK_AHEAD = 16;

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
