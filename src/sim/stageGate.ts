/**
 * A rate ladder's stages run as inference-perf runs them: a stage's arrivals start only once
 * every request of the stages before it has ended, `gapMs` after the last end.
 *
 * inference-perf's multi-process load generator (kubernetes-sigs/inference-perf at 5b1da4d,
 * 2025-09-18, the month of llm-d's benchmarking reports; `inference_perf/loadgen/load_generator.py`
 * `mp_run` and `run_stage`) queues a stage's `int(rate x duration)` requests, then waits
 * `while finished_requests_counter.value < num_requests` and joins the queue before it returns;
 * `mp_run` then sleeps `load.interval` (1 s by default, `inference_perf/config.py` `LoadConfig`)
 * and the next `run_stage` schedules its first request from `time.perf_counter() + 1`. A stage's
 * backlog is thus its own requests only: it never carries into the next.
 *
 * Pure: the fleet says when the requests before have ended (`release`); the gate shifts the held
 * stage's arrivals and keeps each stage's window as run.
 */
import type { Arrival } from '../workload/arrival.ts';
import type { StageWindow } from '../workload/shape.ts';

export interface StageDrain {
  /** The ladder's stages back to back from 0 (`stageWindows`), as the workload timed them. */
  windows: readonly StageWindow[];
  /** From the last end of a stage's requests to the next stage's start, ms. */
  gapMs: number;
}

export class StageGate {
  readonly #nominal: readonly StageWindow[];
  readonly #gapMs: number;
  /** Each stage's window as run: the nominal one shifted by the stage's start. */
  readonly #run: StageWindow[];
  #stage = 0;
  #shiftMs = 0;
  #held: { arrival: Arrival; stage: number } | null = null;

  constructor(drain: StageDrain) {
    if (!(drain.gapMs >= 0)) throw new RangeError('a stage gap needs gapMs >= 0');
    this.#nominal = drain.windows;
    this.#gapMs = drain.gapMs;
    this.#run = drain.windows.map((w) => ({ ...w }));
  }

  /** An arrival of a later stage is held (null) until `release`; the others shifted. */
  admit(arrival: Arrival): Arrival | null {
    const stage = this.#stageOf(arrival.atMs);
    if (stage > this.#stage) {
      this.#held = { arrival, stage };
      return null;
    }
    return this.#shiftMs === 0 ? arrival : { ...arrival, atMs: arrival.atMs + this.#shiftMs };
  }

  /** An arrival waits for the requests before its stage to end. */
  get holding(): boolean {
    return this.#held !== null;
  }

  /**
   * Every request sent before has ended at `nowMs`: the held arrival's stage starts `gapMs`
   * later, its arrivals shifted by as much (stages with no arrival in between take no time).
   */
  release(nowMs: number): Arrival | null {
    const held = this.#held;
    if (held === null) return null;
    const startMs = nowMs + this.#gapMs;
    for (let s = this.#stage + 1; s < held.stage; s++) {
      this.#run[s] = { ratePerS: this.#nominal[s]!.ratePerS, startMs, endMs: startMs };
    }
    this.#shiftMs = startMs - this.#nominal[held.stage]!.startMs;
    for (let s = held.stage; s < this.#nominal.length; s++) {
      const w = this.#nominal[s]!;
      this.#run[s] = {
        ratePerS: w.ratePerS,
        startMs: w.startMs + this.#shiftMs,
        endMs: w.endMs + this.#shiftMs,
      };
    }
    this.#stage = held.stage;
    this.#held = null;
    return { ...held.arrival, atMs: held.arrival.atMs + this.#shiftMs };
  }

  /** Each stage's window as run (stages not reached: shifted as the last one reached). */
  windows(): StageWindow[] {
    return this.#run.map((w) => ({ ...w }));
  }

  #stageOf(atMs: number): number {
    let s = this.#stage;
    while (s + 1 < this.#nominal.length && this.#nominal[s + 1]!.startMs <= atMs) s++;
    return s;
  }
}
