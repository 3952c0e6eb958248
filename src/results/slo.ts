/** The latency targets a run is judged by, and the router seed's defaults. */
import type { Percentiles } from './stats.ts';

/**
 * TPOT p99 and one TTFT target, either a fixed p99 (`ttftP99Ms`) or a slowdown (`ttftSlowdown`):
 * the p99 over measured requests of TTFT / the request's own time to first token on an idle
 * replica (its whole prompt prefilled cold, chunked by the engine's budget). A fixed target
 * cannot be met by a request whose own prefill is longer; a slowdown scales with each prompt.
 */
export interface SloTargets {
  /** TTFT p99 in ms; absent when the TTFT target is a slowdown. */
  ttftP99Ms?: number;
  /** p99 of TTFT / idle-replica TTFT, >= 1; absent when the TTFT target is fixed. */
  ttftSlowdown?: number;
  tpotP99Ms: number;
}

/**
 * SLO defaults, sized for the router seed. TTFT p99 570 ms is one cold 8,000-token prefill on an
 * idle replica (8,000 x 71.3 us), and it is the promise of the seed's rule itself: a warm
 * request (143 ms) stays with its owner only while the extra queue is under the 428 ms its hit
 * saves, so no request should wait longer than starting cold on an idle replica. TPOT p99 of
 * 100 ms is three 33.5 ms decode steps, room for prefill chunks sharing steps with decodes but
 * not for a replica drowning in prefill.
 */
export const DEFAULT_SLO = { ttftP99Ms: 570, tpotP99Ms: 100 } as const;

/**
 * The TTFT one request may take under `slo`, given its idle-replica TTFT: what early stop and
 * goodput count a request against. The SLO is met when at least ceil(0.99 n) of n measured
 * requests stay within their own bound, which is the same as the p99 being within the target.
 */
export function ttftLimitMs(slo: SloTargets, idleTtftMs: number): number {
  return slo.ttftSlowdown !== undefined
    ? slo.ttftSlowdown * idleTtftMs
    : (slo.ttftP99Ms ?? Number.POSITIVE_INFINITY);
}

/** "TTFT p99 ≤ 570 ms" or "TTFT p99 ≤ 3 × idle TTFT", for titles and messages. */
export function describeTtftSlo(slo: SloTargets): string {
  return slo.ttftSlowdown !== undefined
    ? `TTFT p99 ≤ ${slo.ttftSlowdown} × idle TTFT`
    : `TTFT p99 ≤ ${(slo.ttftP99Ms ?? Number.NaN).toLocaleString('en-US')} ms`;
}

/**
 * No errors, some first tokens, and both p99s at or under their targets (TPOT when measured);
 * with a slowdown target, the p99 of the per-request slowdown (`ttftSlowdown`, required).
 */
export function meetsSlo(
  r: { errors: number; ttftMs: Percentiles; tpotMs: Percentiles; ttftSlowdown?: Percentiles },
  slo: SloTargets,
): boolean {
  const ttftMet =
    slo.ttftSlowdown !== undefined
      ? r.ttftSlowdown !== undefined && r.ttftSlowdown.p99 <= slo.ttftSlowdown
      : r.ttftMs.p99 <= (slo.ttftP99Ms ?? Number.POSITIVE_INFINITY);
  return (
    r.errors === 0 &&
    r.ttftMs.count > 0 &&
    ttftMet &&
    (r.tpotMs.count === 0 || r.tpotMs.p99 <= slo.tpotP99Ms)
  );
}
