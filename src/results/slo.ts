/** The latency targets a run is judged by, and the router seed's defaults. */
import type { Percentiles } from './stats.ts';

export interface SloTargets {
  ttftP99Ms: number;
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

/** No errors, some first tokens, and both p99s at or under their targets (TPOT when measured). */
export function meetsSlo(
  r: { errors: number; ttftMs: Percentiles; tpotMs: Percentiles },
  slo: SloTargets,
): boolean {
  return (
    r.errors === 0 &&
    r.ttftMs.count > 0 &&
    r.ttftMs.p99 <= slo.ttftP99Ms &&
    (r.tpotMs.count === 0 || r.tpotMs.p99 <= slo.tpotP99Ms)
  );
}
