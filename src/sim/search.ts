/**
 * Replica-count search: the fewest replicas with which a policy meets the SLO, by bisection.
 * Starts from a guess, doubles until the SLO is met (or a limit is passed), halves until it is
 * not, then bisects the bracket. Assumes more replicas never hurt, which holds for every policy
 * here up to simulation noise. Probes stop early once the SLO is certainly missed.
 */
import type { SearchResult, SimulatedRun } from '../results/result.ts';

export interface SearchOptions {
  /** First replica count to try. */
  start: number;
  /** Give up above this many replicas. */
  max: number;
  /** Runs one simulation at `replicas` (the caller fixes policy, workload and seed). */
  probe: (replicas: number) => SimulatedRun;
  onProbe?: (result: SimulatedRun) => void;
}

export function searchMinReplicas(policy: string, opts: SearchOptions): SearchResult {
  const probes = new Map<number, SimulatedRun>();
  const met = (n: number): boolean => {
    let r = probes.get(n);
    if (r === undefined) {
      r = opts.probe(n);
      probes.set(n, r);
      opts.onProbe?.(r);
    }
    return r.sloMet;
  };
  let hi = Math.max(1, Math.min(opts.start, opts.max));
  let lo = 0; // 0 replicas never meet an SLO
  if (met(hi)) {
    // Halve down to a failing count.
    for (let n = Math.floor(hi / 2); n >= 1; n = Math.floor(n / 2)) {
      if (!met(n)) {
        lo = n;
        break;
      }
      hi = n;
    }
  } else {
    lo = hi;
    let found = false;
    while (hi < opts.max) {
      hi = Math.min(opts.max, hi * 2);
      if (met(hi)) {
        found = true;
        break;
      }
      lo = hi;
    }
    if (!found) return finish(policy, null, probes);
  }
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (met(mid)) hi = mid;
    else lo = mid;
  }
  return finish(policy, hi, probes);
}

function finish(
  policy: string,
  minReplicas: number | null,
  probes: Map<number, SimulatedRun>,
): SearchResult {
  return {
    policy,
    minReplicas,
    probes: [...probes.values()]
      .sort((a, b) => a.replicas - b.replicas)
      .map((r) => ({
        replicas: r.replicas,
        sloMet: r.sloMet,
        ttftP99Ms: r.ttftMs.p99,
        tpotP99Ms: r.tpotMs.p99,
      })),
  };
}
