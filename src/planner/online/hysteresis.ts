/**
 * The planner's hysteresis: from the replica counts its searches answer, the count it tells the
 * autoscaler. Pure: time is the caller's `nowMs`.
 *
 *   desired(t) = max(minReplicas, max { answer(s) : t - scaleDownMs < s <= t })
 *
 * the highest answer of the last `scaleDownMs`. So an answer above the count raises it at once
 * (the SLO would be missed); the count goes down only once every higher answer is older than
 * `scaleDownMs`, i.e. after the lower answers held that long, and then to the highest answer of
 * that stretch, not the last: the fleet keeps the headroom the busiest moment needed. A constant
 * load whose answer wobbles between n and n + 1 (with an n + 1 at least every `scaleDownMs`)
 * stays at n + 1, and a higher load never gets fewer replicas than a lower one at the same moment
 * (a max over the same times of larger answers).
 */

export interface HysteresisOptions {
  /** How long lower answers must hold before the count goes down, ms. */
  scaleDownMs: number;
  /** Never answer fewer (default 1). */
  minReplicas?: number;
}

export type PlannerMove = 'first' | 'up' | 'down' | 'hold';

export interface HysteresisStep {
  /** The count to run now. */
  desired: number;
  move: PlannerMove;
}

export class Hysteresis {
  readonly scaleDownMs: number;
  readonly minReplicas: number;
  // Answers of the last scaleDownMs whose value no later answer reaches: a monotone queue
  // (decreasing values), its head the maximum.
  #answers: { atMs: number; replicas: number }[] = [];
  #desired: number | null = null;

  constructor(options: HysteresisOptions) {
    if (!(options.scaleDownMs >= 0)) {
      throw new RangeError(`scaleDownMs must be >= 0, got ${options.scaleDownMs}`);
    }
    const min = options.minReplicas ?? 1;
    if (!Number.isInteger(min) || min < 0) {
      throw new RangeError(`minReplicas must be an integer >= 0, got ${min}`);
    }
    this.scaleDownMs = options.scaleDownMs;
    this.minReplicas = min;
  }

  /** The count in force (null before the first answer). */
  get desired(): number | null {
    return this.#desired;
  }

  /** A search answered `answer` replicas at `nowMs` (answers come in time order). */
  step(answer: number, nowMs: number): HysteresisStep {
    const replicas = Math.max(this.minReplicas, Math.ceil(answer));
    const q = this.#answers;
    while (q.length > 0 && q[q.length - 1]!.replicas <= replicas) q.pop();
    q.push({ atMs: nowMs, replicas });
    while (q[0]!.atMs <= nowMs - this.scaleDownMs && q.length > 1) q.shift();
    const desired = q[0]!.replicas;
    const before = this.#desired;
    this.#desired = desired;
    const move: PlannerMove =
      before === null ? 'first' : desired > before ? 'up' : desired < before ? 'down' : 'hold';
    return { desired, move };
  }
}
