/**
 * The driver of an engine whose steps take real time (the llama.cpp runtime): steps run back to
 * back while there is work, each one awaited, and its results are delivered as soon as it ends.
 * A step's start is when its admitted requests were scheduled; `lagMs` is always 0 (nothing is
 * due at a modelled time). Same surface and the same sink calls as the wall-clock driver, so
 * the request code does not know which runtime serves it.
 */
import type { EngineCounters, EngineRequest, StepResult } from '../types.ts';
import { type EngineDriver, EngineDeadError } from './driver.ts';
import type { RequestSink } from './requestSink.ts';
import { SinkTable } from './sinkTable.ts';

/** An engine core whose step is asynchronous (LlamaCppEngine implements it). */
export interface AsyncSteppableEngine {
  add(req: EngineRequest): void;
  abort(id: string): void;
  step(): Promise<StepResult>;
  hasWork(): boolean;
  counters(): EngineCounters;
}

export interface StepLoopOptions {
  onStepEnd?: (result: StepResult, lagMs: number) => void;
}

export class StepLoopDriver implements EngineDriver {
  readonly #core: AsyncSteppableEngine;
  readonly #onStepEnd: StepLoopOptions['onStepEnd'];
  readonly #sinks: SinkTable;
  #loop: Promise<void> | null = null;
  #closed = false;
  #dead: EngineDeadError | null = null;
  #steps = 0;

  constructor(core: AsyncSteppableEngine, options: StepLoopOptions = {}) {
    this.#core = core;
    this.#sinks = new SinkTable((id) => this.#core.abort(id));
    this.#onStepEnd = options.onStepEnd;
  }

  get steps(): number {
    return this.#steps;
  }

  get dead(): EngineDeadError | null {
    return this.#dead;
  }

  counters(): EngineCounters {
    return this.#core.counters();
  }

  submit(req: Omit<EngineRequest, 'arrivalMs'>, sink: RequestSink): void {
    if (this.#dead) throw this.#dead;
    if (this.#closed) throw new Error('driver is closed');
    this.#core.add({ ...req, arrivalMs: performance.now() });
    this.#sinks.add(req.id, sink);
    this.#wake();
  }

  /** Aborts a request now: its KV blocks are freed before this returns (its sequence after the step in flight). */
  abort(id: string): void {
    if (!this.#sinks.delete(id)) return;
    this.#core.abort(id);
    this.#wake();
  }

  close(): void {
    this.#closed = true;
    this.#sinks.clear();
  }

  /** Resolves once no step is in flight (after close(): the loop has stopped). */
  async idle(): Promise<void> {
    await this.#loop;
  }

  #wake(): void {
    if (this.#loop !== null || this.#closed) return;
    this.#loop = this.#run().finally(() => {
      this.#loop = null;
    });
  }

  async #run(): Promise<void> {
    // Let the submitting request's handler finish its turn first (it registers its sinks).
    await new Promise<void>((resolve) => setImmediate(resolve));
    while (!this.#closed && this.#core.hasWork()) {
      const startedMs = performance.now();
      let result: StepResult;
      try {
        result = await this.#core.step();
      } catch (err) {
        this.#fail(err as Error);
        return;
      }
      this.#steps++;
      if (this.#closed) return;
      this.#deliver(result, startedMs);
      // Nothing computed: no progress until a request arrives or leaves.
      if (result.prefillTokens + result.decodeTokens === 0) return;
    }
  }

  #fail(err: Error): void {
    this.#dead = new EngineDeadError(err);
    this.#closed = true;
    this.#sinks.failAll(this.#dead);
  }

  #deliver(result: StepResult, startedMs: number): void {
    this.#onStepEnd?.(result, 0);
    this.#sinks.deliver(result, () => startedMs);
  }
}
