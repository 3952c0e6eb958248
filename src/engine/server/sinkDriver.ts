/**
 * What both engine drivers share (driver.ts's WallClockDriver, stepLoop.ts's StepLoopDriver): the
 * surface the request code sees, the table of request sinks, and how a failed core is reported.
 * The drivers differ only in how steps are paced (`wake`).
 */
import type { EngineCounters, EngineRequest } from '../types.ts';
import type { RequestSink } from './requestSink.ts';
import { SinkTable } from './sinkTable.ts';

/** What the request code needs from a driver (WallClockDriver, StepLoopDriver). */
export interface EngineDriver {
  readonly dead: EngineDeadError | null;
  readonly steps: number;
  counters(): EngineCounters;
  submit(req: Omit<EngineRequest, 'arrivalMs'>, sink: RequestSink): void;
  abort(id: string): void;
  close(): void;
}

export class EngineDeadError extends Error {
  readonly code = 'ERR_ENGINE_DEAD';
  constructor(cause: Error) {
    super(`the engine core failed: ${cause.message}`, { cause });
  }
}

/** The part of an engine core that requests reach, whether its step is synchronous or not. */
interface RequestCore {
  add(req: EngineRequest): void;
  abort(id: string): void;
  counters(): EngineCounters;
}

export abstract class SinkDriver implements EngineDriver {
  protected readonly sinks: SinkTable;
  protected closed = false;
  /** Steps run so far. */
  protected stepCount = 0;
  readonly #requestCore: RequestCore;
  readonly #arrivalMs: () => number;
  #dead: EngineDeadError | null = null;

  /** `arrivalMs`: the clock a submitted request's arrival is stamped with. */
  constructor(core: RequestCore, arrivalMs: () => number) {
    this.#requestCore = core;
    this.#arrivalMs = arrivalMs;
    this.sinks = new SinkTable((id) => this.#requestCore.abort(id));
  }

  /** Starts stepping if the driver is idle. */
  protected abstract wake(): void;

  get steps(): number {
    return this.stepCount;
  }

  /** Set once the core has thrown: the server reports 503 from then on. */
  get dead(): EngineDeadError | null {
    return this.#dead;
  }

  counters(): EngineCounters {
    return this.#requestCore.counters();
  }

  /** Queues a request; throws the core's EngineError when it can never run. */
  submit(req: Omit<EngineRequest, 'arrivalMs'>, sink: RequestSink): void {
    if (this.#dead) throw this.#dead;
    if (this.closed) throw new Error('driver is closed');
    this.#requestCore.add({ ...req, arrivalMs: this.#arrivalMs() });
    this.sinks.add(req.id, sink);
    this.wake();
  }

  /**
   * Aborts a request now: the core frees its KV blocks before this returns (under the step loop,
   * its sequence's after the step in flight).
   */
  abort(id: string): void {
    if (!this.sinks.delete(id)) return;
    this.#requestCore.abort(id);
    // An abort may unblock waiting requests (KV freed): make sure the loop looks again.
    this.wake();
  }

  close(): void {
    this.closed = true;
    this.sinks.clear();
  }

  /** A throwing core has unknown state: stop stepping, fail everyone, stay up to say so. */
  protected fail(err: Error): void {
    this.#dead = new EngineDeadError(err);
    this.closed = true;
    this.sinks.failAll(this.#dead);
  }
}
