/**
 * The replica-count search as a pure function of what is known: `planSearch` replays the search
 * over the probes decided so far and returns either the next count it needs or its answer. A
 * driver runs the count it is asked for and asks again; the serial driver does so in order, the
 * parallel one also runs counts the search may ask for next, and both end with the same answer
 * and the same list of probes, because only the replay decides which probes the answer used.
 *
 * The search: start from a guess, double until the SLO is met (up to `max`), halve until it is
 * not, bisect the bracket. Bisection assumes that more replicas never hurt, which does not hold
 * for every policy (a hash that moves a hot prefix onto a busy replica can miss with one replica
 * more), so the answer's neighbourhood is checked: counts above it are probed until two in a row
 * meet the SLO, and every count above the answer that missed is reported.
 */

export interface SearchBounds {
  /** First replica count to try. */
  start: number;
  /** Give up above this many replicas. */
  max: number;
}

export interface SearchAnswer {
  /** Fewest replicas that met the SLO; null when none up to `max` did. */
  minReplicas: number | null;
  /** Counts above `minReplicas` that missed the SLO (empty: monotone as far as probed). */
  misses: number[];
  /** The counts the search used, ascending. */
  probed: number[];
}

export type SearchStep = { probe: number } | { answer: SearchAnswer };

/** Counts in a row above the answer that must meet the SLO before the search trusts it. */
export const VERIFY_RUN = 2;

/** Replays the search with `met` (undefined: not known yet). */
export function planSearch(
  bounds: SearchBounds,
  met: (replicas: number) => boolean | undefined,
): SearchStep {
  const it = searchSteps(bounds);
  const probed = new Set<number>();
  let step = it.next();
  while (!step.done) {
    const n = step.value;
    const known = met(n);
    if (known === undefined) return { probe: n };
    probed.add(n);
    step = it.next(known);
  }
  return { answer: { ...step.value, probed: [...probed].sort((a, b) => a - b) } };
}

/** The search, yielding each count it needs and receiving whether that count met the SLO. */
function* searchSteps(
  bounds: SearchBounds,
): Generator<number, Omit<SearchAnswer, 'probed'>, boolean> {
  const max = Math.max(1, bounds.max);
  let hi = Math.max(1, Math.min(bounds.start, max));
  let lo = 0; // 0 replicas never meet an SLO
  if (yield hi) {
    // Halve down to a failing count.
    for (let n = Math.floor(hi / 2); n >= 1; n = Math.floor(n / 2)) {
      if (!(yield n)) {
        lo = n;
        break;
      }
      hi = n;
    }
  } else {
    lo = hi;
    let found = false;
    while (hi < max) {
      hi = Math.min(max, hi * 2);
      if (yield hi) {
        found = true;
        break;
      }
      lo = hi;
    }
    if (!found) return { minReplicas: null, misses: [] };
  }
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (yield mid) hi = mid;
    else lo = mid;
  }
  // The neighbourhood: upward until VERIFY_RUN counts in a row meet (or the limit).
  const misses: number[] = [];
  let run = 0;
  for (let n = hi + 1; n <= max && run < VERIFY_RUN; n++) {
    if (yield n) run++;
    else {
      misses.push(n);
      run = 0;
    }
  }
  return { minReplicas: hi, misses };
}
