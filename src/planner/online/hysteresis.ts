/**
 * The planner's hysteresis: from the replica counts its searches answer, the count it tells the
 * autoscaler. Pure: time is the caller's `nowMs`.
 *
 *   up:   an answer above the current count replaces it at once (the SLO would be missed);
 *   down: only after answers below the current count held for `scaleDownMs` without one at or
 *         above it, and then to the highest answer of that stretch, not the last: the fleet keeps
 *         the headroom the busiest moment of the stretch needed. An answer equal to the current
 *         count ends the stretch.
 *
 * So a constant load whose answer wobbles between n and n + 1 settles at n + 1 and stays there,
 * and a higher load never gets a lower count than a lower load at the same moment.
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
  /** A scale-down waiting to happen: since when the answers were lower, and their highest. */
  pendingDown: { sinceMs: number; toReplicas: number } | null;
}

export class Hysteresis {
  readonly scaleDownMs: number;
  readonly minReplicas: number;
  #desired: number | null = null;
  #lowSinceMs: number | null = null;
  #lowMax = 0;

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

  /** A search answered `answer` replicas at `nowMs`. */
  step(answer: number, nowMs: number): HysteresisStep {
    const wanted = Math.max(this.minReplicas, Math.ceil(answer));
    let move: PlannerMove = 'hold';
    if (this.#desired === null) {
      this.#desired = wanted;
      move = 'first';
    } else if (wanted > this.#desired) {
      this.#desired = wanted;
      this.#lowSinceMs = null;
      move = 'up';
    } else if (wanted === this.#desired) {
      this.#lowSinceMs = null;
    } else {
      if (this.#lowSinceMs === null) {
        this.#lowSinceMs = nowMs;
        this.#lowMax = wanted;
      } else {
        this.#lowMax = Math.max(this.#lowMax, wanted);
      }
      if (nowMs - this.#lowSinceMs >= this.scaleDownMs) {
        this.#desired = this.#lowMax;
        this.#lowSinceMs = null;
        move = 'down';
      }
    }
    return {
      desired: this.#desired,
      move,
      pendingDown:
        this.#lowSinceMs === null ? null : { sinceMs: this.#lowSinceMs, toReplicas: this.#lowMax },
    };
  }
}
