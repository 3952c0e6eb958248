/**
 * The wall-clock driver: runs the clockless engine core in real time. Each step's results
 * (tokens, finishes, KV events) are delivered when the step is due to end, `durationMs / speedup`
 * after it started, and the next step starts at that same instant. Steps are scheduled against
 * their due times, never against "now", so timer jitter does not accumulate: a late wake-up runs
 * the following steps early until the loop is back on schedule, and the lateness (`lagMs`) is
 * reported for every step. Idle when the core has no work; woken by a new request.
 *
 * Timers in Node have 1 ms granularity, too coarse for sub-millisecond steps at high speedups, so
 * the last stretch of each wait polls with setImmediate (which still lets I/O run in between).
 */
import type { EngineCounters, EngineRequest, StepResult } from '../types.ts';
import { SinkDriver } from './sinkDriver.ts';

/** What the driver needs from the engine core (EngineCore implements it). */
export interface SteppableEngine {
  add(req: EngineRequest): void;
  abort(id: string): void;
  step(): StepResult;
  hasWork(): boolean;
  counters(): EngineCounters;
  /** LoRA adapters loaded and unloaded outside steps (EngineCore has them when LoRA is on). */
  loadAdapter?(name: string): void;
  unloadAdapter?(name: string): boolean;
  /** A fault: the prefix cache emptied with no event (EngineCore has it). */
  forgetCacheSilently?(): number;
}

export { type EngineDriver, EngineDeadError } from './sinkDriver.ts';

export interface DriverOptions {
  /** Modeled time runs this many times faster than the wall clock. */
  speedup: number;
  /** Called at each step's due end, before its tokens are delivered. */
  onStepEnd?: (result: StepResult, lagMs: number) => void;
  /** Monotonic clock in ms (injected for tests). */
  nowMs?: () => number;
}

/** Below this much waiting, poll with setImmediate instead of arming a timer. */
const POLL_WINDOW_MS = 1.5;
/** Steps run back to back at most this many times before yielding to I/O. */
const MAX_STEPS_PER_TURN = 32;

export class WallClockDriver extends SinkDriver {
  readonly #core: SteppableEngine;
  readonly #speedup: number;
  readonly #onStepEnd: DriverOptions['onStepEnd'];
  readonly #nowMs: () => number;
  /** When the pending step ends (or the next step may start), on #nowMs's clock. */
  #dueMs = 0;
  #pending: StepResult | null = null;
  #pendingLagMs = 0;
  #running = false;
  #timer: NodeJS.Timeout | null = null;
  #immediate: NodeJS.Immediate | null = null;

  constructor(core: SteppableEngine, options: DriverOptions) {
    if (!(options.speedup > 0)) throw new RangeError(`speedup must be > 0, got ${options.speedup}`);
    const nowMs = options.nowMs ?? (() => performance.now());
    super(core, nowMs);
    this.#core = core;
    this.#speedup = options.speedup;
    this.#onStepEnd = options.onStepEnd;
    this.#nowMs = nowMs;
  }

  override close(): void {
    if (this.#timer) clearTimeout(this.#timer);
    if (this.#immediate) clearImmediate(this.#immediate);
    this.#timer = null;
    this.#immediate = null;
    super.close();
  }

  protected wake(): void {
    if (this.#running || this.closed) return;
    this.#running = true;
    this.#dueMs = this.#nowMs();
    this.#arm(0);
  }

  #arm(waitMs: number): void {
    if (waitMs > POLL_WINDOW_MS) {
      this.#timer = setTimeout(this.#turn, waitMs - POLL_WINDOW_MS);
    } else {
      this.#immediate = setImmediate(this.#turn);
    }
  }

  readonly #turn = (): void => {
    this.#timer = null;
    this.#immediate = null;
    if (this.closed) return;
    try {
      this.#runDueSteps();
    } catch (err) {
      this.fail(err as Error);
    }
  };

  #runDueSteps(): void {
    for (let n = 0; n < MAX_STEPS_PER_TURN; n++) {
      const now = this.#nowMs();
      if (now < this.#dueMs) {
        this.#arm(this.#dueMs - now);
        return;
      }
      const lagMs = now - this.#dueMs;
      if (this.#pending) this.#deliver(this.#pending, this.#pendingLagMs);
      this.#pending = null;
      if (!this.#core.hasWork()) {
        this.#running = false;
        return;
      }
      const result = this.#core.step();
      this.stepCount++;
      if (result.durationMs <= 0) {
        // Nothing computed: no progress is possible until a request arrives or leaves.
        this.#deliver(result, lagMs);
        this.#running = false;
        return;
      }
      this.#pending = result;
      this.#pendingLagMs = lagMs;
      this.#dueMs += result.durationMs / this.#speedup;
    }
    this.#arm(Math.max(0, this.#dueMs - this.#nowMs()));
  }

  #deliver(result: StepResult, lagMs: number): void {
    this.#onStepEnd?.(result, lagMs);
    this.sinks.deliver(result, () => this.#nowMs() - result.durationMs / this.#speedup);
  }
}
