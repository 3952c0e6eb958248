/**
 * The fleet-wide admission bound: a new request is refused while every replica it could go to
 * already has more than `maxQueueMs` of modelled prefill queued, rather than joining a queue
 * that only grows under overload (every request then misses its TTFT target, and the fleet does
 * the work anyway). The queue of a replica is the router ledger's queued prompt tokens (uncached
 * prompt tokens routed there whose first token has not come back) times the served model's
 * prefill cost per token:
 *
 *   queueMs(r) = queuedPromptTokens(r) x prefillUsPerToken / 1000
 *   admit  <=>  min over candidate replicas of queueMs(r) <= maxQueueMs
 *
 * Candidates are the eligible replicas (the router's guards passed); when none is eligible the
 * router fails open to any healthy one, so those count instead. With no candidate at all the
 * request is let through: the router answers it (no healthy replica), not this bound.
 *
 * The gateway and the simulator both call `queueBoundVerdict`, each with its own view of the
 * replicas: the gateway from the router's snapshot, the simulator from its fleet.
 */

export interface QueueView {
  queuedPromptTokens: number;
  /** Passed the router's guards (healthy, fresh report, KV under the threshold). */
  eligible: boolean;
}

export type QueueVerdict =
  | { admitted: true; shortestQueueMs: number }
  | { admitted: false; shortestQueueMs: number; retryAfterMs: number };

export function queueBoundVerdict(
  replicas: readonly QueueView[],
  prefillUsPerToken: number,
  maxQueueMs: number,
): QueueVerdict {
  let shortestEligible = Number.POSITIVE_INFINITY;
  let shortestAny = Number.POSITIVE_INFINITY;
  for (const r of replicas) {
    shortestAny = Math.min(shortestAny, r.queuedPromptTokens);
    if (r.eligible) shortestEligible = Math.min(shortestEligible, r.queuedPromptTokens);
  }
  const tokens = Number.isFinite(shortestEligible) ? shortestEligible : shortestAny;
  if (!Number.isFinite(tokens)) return { admitted: true, shortestQueueMs: 0 };
  const shortestQueueMs = (tokens * prefillUsPerToken) / 1000;
  if (shortestQueueMs <= maxQueueMs) return { admitted: true, shortestQueueMs };
  // The shortest queue drains at about one token per prefillUsPerToken: that long until a
  // retry could be admitted, if nothing else arrives meanwhile.
  return { admitted: false, shortestQueueMs, retryAfterMs: shortestQueueMs - maxQueueMs };
}
