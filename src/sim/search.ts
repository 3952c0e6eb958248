/**
 * Replica-count search, serially: the fewest replicas with which a policy meets the SLO
 * (`searchPlan.ts` says how it searches and checks the answer). Probes stop early once the SLO
 * is certainly missed. `parallel.ts` runs the same search on worker threads.
 */
import type { SearchProbe, SearchResult, SearchUnmet, SimulatedRun } from '../results/result.ts';
import type { SloTargets } from '../results/slo.ts';
import { type SearchAnswer, type SearchBounds, planSearch } from './searchPlan.ts';

export interface SearchOptions extends SearchBounds {
  /** Runs one simulation at `replicas` (the caller fixes policy, workload and seed). */
  probe: (replicas: number) => SimulatedRun;
  onProbe?: (result: SimulatedRun) => void;
  /** Why nothing met the SLO (`feasibility.ts`): asked first, and when nothing met it. */
  diagnose?: () => SearchUnmet;
}

/**
 * A diagnosis that proves no count can meet the SLO ('out-of-reach'), asked before any probe.
 * Only a fixed TTFT target can be out of reach: a request alone on a replica meets a slowdown
 * of 1 or more.
 */
export function provenUnmet(slo: SloTargets, diagnose: () => SearchUnmet): SearchUnmet | null {
  if (slo.ttftSlowdown !== undefined) return null;
  const unmet = diagnose();
  return unmet.reason === 'out-of-reach' ? unmet : null;
}

export function searchMinReplicas(
  policy: string,
  opts: SearchOptions & { slo?: SloTargets },
): SearchResult {
  const runs = new Map<number, SimulatedRun>();
  const proven = opts.diagnose && opts.slo && provenUnmet(opts.slo, opts.diagnose);
  if (proven)
    return searchResult(policy, { minReplicas: null, misses: [], probed: [] }, runs, proven);
  for (;;) {
    const step = planSearch(opts, (n) => runs.get(n)?.sloMet);
    if ('answer' in step) {
      const unmet =
        step.answer.minReplicas === null ? (opts.diagnose?.() ?? notMet(opts.max)) : null;
      return searchResult(policy, step.answer, runs, unmet);
    }
    const run = opts.probe(step.probe);
    runs.set(step.probe, run);
    opts.onProbe?.(run);
  }
}

/** The search's result from its answer and the runs behind it (extra runs are left out). */
export function searchResult(
  policy: string,
  answer: SearchAnswer,
  runs: ReadonlyMap<number, SimulatedRun>,
  unmet: SearchUnmet | null,
): SearchResult {
  return {
    policy,
    minReplicas: answer.minReplicas,
    monotone: answer.misses.length === 0,
    misses: answer.misses,
    unmet,
    probes: answer.probed.map((n) => probeOf(runs.get(n)!)),
  };
}

const notMet = (maxReplicas: number): SearchUnmet => ({
  reason: 'not-met',
  measured: Number.NaN,
  outOfReach: Number.NaN,
  maxReplicas,
});

function probeOf(r: SimulatedRun): SearchProbe {
  return {
    replicas: r.replicas,
    sloMet: r.sloMet,
    stoppedEarly: r.stoppedEarly,
    ttftP99Ms: r.ttftMs.p99,
    tpotP99Ms: r.tpotMs.p99,
    ...(r.ttftSlowdown !== undefined && { ttftSlowdownP99: r.ttftSlowdown.p99 }),
  };
}
