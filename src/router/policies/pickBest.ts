/** Arg-min / arg-max with explicit tie-breaks, drawing from the seeded stream only on a tie. */
import type { Rng } from '../../util/rng.ts';

/**
 * Index of the smallest `scores[i]`; among equals, the smallest `tie[i]` when given; among
 * those, a uniform seeded draw (reservoir sampling, so one pass and no allocation).
 */
export function argMin(scores: ArrayLike<number>, rng: Rng, tie?: ArrayLike<number>): number {
  let best = 0;
  let ties = 1;
  for (let i = 1; i < scores.length; i++) {
    const s = scores[i]!;
    const b = scores[best]!;
    if (s < b || (s === b && tie !== undefined && tie[i]! < tie[best]!)) {
      best = i;
      ties = 1;
    } else if (s === b && (tie === undefined || tie[i] === tie[best])) {
      ties++;
      if (rng.int(ties) === 0) best = i;
    }
  }
  return best;
}

/** Index of the largest `scores[i]`; ties broken as in argMin. */
export function argMax(scores: ArrayLike<number>, rng: Rng, tie?: ArrayLike<number>): number {
  const negated = Array.from(scores, (s) => -s);
  return argMin(negated, rng, tie);
}
