/**
 * Guards that run before any policy: a replica is eligible only when it is healthy, its last
 * report is fresh, and its KV usage is at or under the threshold (admitting above ~95 % forces
 * preemption). A replica that has not reported yet is judged on the router's ledger alone.
 * When guards leave nothing, the router fails open to the least loaded healthy replica, where
 * load counts the prefill this request would add there (queued + uncached prompt tokens).
 */
import type { Rng } from '../util/rng.ts';
import { argMin } from './policies/pickBest.ts';

export type Verdict = 'eligible' | 'down' | 'stale' | 'kv-full';

export interface FilterThresholds {
  /** Maximum KV usage (0..1) still admitted. */
  kvThreshold: number;
  /** Maximum age of the last report, in ms. */
  staleMs: number;
}

export interface FilterInput {
  healthy: boolean;
  kvUsage: number | undefined;
  reportedAtMs: number | undefined;
}

export function judge(replica: FilterInput, nowMs: number, limits: FilterThresholds): Verdict {
  return verdictOf(
    !replica.healthy,
    replica.reportedAtMs !== undefined,
    replica.reportedAtMs ?? 0,
    replica.kvUsage ?? 0,
    nowMs,
    limits,
  );
}

/** judge's rules on plain values (`reportedAtMs` is read only when `reported`). */
export function verdictOf(
  down: boolean,
  reported: boolean,
  reportedAtMs: number,
  kvUsage: number,
  nowMs: number,
  limits: FilterThresholds,
): Verdict {
  if (down) return 'down';
  if (!reported) return 'eligible';
  if (nowMs - reportedAtMs > limits.staleMs) return 'stale';
  if (kvUsage > limits.kvThreshold) return 'kv-full';
  return 'eligible';
}

/**
 * Fail-open choice among healthy replicas: least prefill work (queued prompt tokens from the
 * ledger plus this request's uncached tokens there), then fewest in-flight requests, then a
 * seeded draw. Returns an index into the arrays.
 */
export function leastLoaded(
  prefillTokens: readonly number[],
  inFlight: readonly number[],
  rng: Rng,
): number {
  return argMin(prefillTokens, rng, inFlight);
}
