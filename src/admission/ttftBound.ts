/**
 * The TTFT bound, checked after the router picked a replica: a request is refused when its
 * modelled time to first token there exceeds `maxTtftMs`. The model is the prefill work ahead of
 * it plus its own:
 *
 *   ttftMs = (queuedPromptTokens(chosen) + uncachedTokens) x prefillUsPerToken / 1000
 *
 * with `queuedPromptTokens` the ledger's queue there before this request. Unlike the queue bound
 * (`queueBound.ts`: some replica is nearly idle), it refuses exactly the requests the fleet
 * cannot serve in time where the router would send them: under overload that is mostly the cold
 * spills (an 8,000-token prompt alone is 570 ms on the seed's replica) and the requests behind a
 * deep owner queue, while warm requests to a short queue still get in.
 */

export type TtftVerdict =
  | { admitted: true; predictedMs: number }
  | { admitted: false; predictedMs: number; retryAfterMs: number };

export function ttftBoundVerdict(
  queuedPromptTokens: number,
  uncachedTokens: number,
  prefillUsPerToken: number,
  maxTtftMs: number,
): TtftVerdict {
  const predictedMs = ((queuedPromptTokens + uncachedTokens) * prefillUsPerToken) / 1000;
  if (predictedMs <= maxTtftMs) return { admitted: true, predictedMs };
  // The queue ahead drains at about one token per prefillUsPerToken.
  return { admitted: false, predictedMs, retryAfterMs: predictedMs - maxTtftMs };
}
