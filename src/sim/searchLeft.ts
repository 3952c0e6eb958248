/**
 * How many probes a replica search still needs, for its progress line: the search replayed
 * (`planSearch`) under every monotone outcome that agrees with the probes decided so far, where
 * the SLO is met from some count T up (T = max + 1: never), and the counts it would still ask
 * for averaged over those T. Bisection assumes monotone outcomes too, so this is the search's
 * own expectation; a policy that is not monotone can take a few probes more (the check above
 * the answer). When the decided probes fit no threshold, every T is averaged.
 */
import { planSearch, type SearchBounds } from './searchPlan.ts';

export interface ProbesLeft {
  /** Mean over the thresholds that fit of the probes still to decide (running ones included). */
  expected: number;
  /** The most any fitting threshold needs. */
  most: number;
}

export function probesLeft(
  bounds: SearchBounds,
  known: (replicas: number) => boolean | undefined,
): ProbesLeft {
  const max = Math.max(1, bounds.max);
  if ('answer' in planSearch(bounds, known)) return { expected: 0, most: 0 };
  const decided: [number, boolean][] = [];
  for (let n = 1; n <= max; n++) {
    const k = known(n);
    if (k !== undefined) decided.push([n, k]);
  }
  const fits = (t: number): boolean => decided.every(([n, k]) => k === n >= t);
  let thresholds: number[] = [];
  for (let t = 1; t <= max + 1; t++) if (fits(t)) thresholds.push(t);
  if (thresholds.length === 0) thresholds = Array.from({ length: max + 1 }, (_, i) => i + 1);
  let sum = 0;
  let most = 0;
  for (const t of thresholds) {
    const asked = new Set<number>();
    const met = (n: number): boolean => {
      const k = known(n);
      if (k !== undefined) return k;
      asked.add(n);
      return n >= t;
    };
    // `met` always answers, so one replay runs the search to its end.
    planSearch(bounds, met);
    sum += asked.size;
    most = Math.max(most, asked.size);
  }
  return { expected: sum / thresholds.length, most };
}
