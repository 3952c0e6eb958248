/**
 * The false-alarm bound of the cache audit, as exact binomial tails.
 *
 * A healthy replica's prediction can still miss on a request now and then (a block evicted
 * between the route and the engine's admission, a prompt that raced its own prefix into the
 * engine). The audit assumes such misses are independent with probability at most
 * `healthyMismatchRate` (p0) per request, and flags a replica when at least `threshold` (k) of
 * the last `windowRequests` (n) requests missed the same way. For one judgment:
 *
 *   P(false alarm) <= P(Bin(n, p0) >= k) = sum_{i=k..n} C(n, i) p0^i (1 - p0)^(n - i)
 *
 * and over a trace of N requests (one judgment per request) at most N times that (union bound).
 * `thresholdFor` picks the smallest k whose tail is at most the per-judgment budget alpha.
 */

/** P(X >= k) for X ~ Binomial(n, p), summed exactly (n is a window: tens to hundreds). */
export function binomialTail(n: number, p: number, k: number): number {
  if (k <= 0) return 1;
  if (k > n) return 0;
  if (p <= 0) return 0;
  if (p >= 1) return 1;
  // Terms in log space: C(n, i) p^i (1-p)^(n-i), i from k to n.
  const lp = Math.log(p);
  const lq = Math.log1p(-p);
  let logC = 0; // log C(n, 0)
  let sum = 0;
  for (let i = 0; i <= n; i++) {
    if (i > 0) logC += Math.log((n - i + 1) / i);
    if (i >= k) sum += Math.exp(logC + i * lp + (n - i) * lq);
  }
  return Math.min(1, sum);
}

/**
 * The smallest mismatch count k in a window of n requests with P(Bin(n, p0) >= k) <= alpha;
 * n + 1 (never) when even n mismatches are too likely.
 */
export function thresholdFor(
  windowRequests: number,
  healthyMismatchRate: number,
  alpha: number,
): number {
  for (let k = 0; k <= windowRequests; k++) {
    if (binomialTail(windowRequests, healthyMismatchRate, k) <= alpha) return k;
  }
  return windowRequests + 1;
}

/** The audit's stated guarantees for a window and threshold, for docs, logs and tests. */
export interface AuditBound {
  windowRequests: number;
  threshold: number;
  healthyMismatchRate: number;
  /** P(one judgment flags a healthy replica) at most this. */
  falseAlarmPerJudgment: number;
  /** A fault that makes every request miss is flagged after exactly this many requests. */
  requestsToDetectCertainFault: number;
  /** P(a fault missing with rate 0.5 goes unflagged over one full window). */
  missProbabilityAtHalf: number;
}

export function auditBound(
  windowRequests: number,
  threshold: number,
  healthyMismatchRate: number,
): AuditBound {
  return {
    windowRequests,
    threshold,
    healthyMismatchRate,
    falseAlarmPerJudgment: binomialTail(windowRequests, healthyMismatchRate, threshold),
    requestsToDetectCertainFault: threshold,
    missProbabilityAtHalf: 1 - binomialTail(windowRequests, 0.5, threshold),
  };
}
