/**
 * The driver of an engine whose steps take real time (the llama.cpp runtime): steps run back to
 * back while there is work, each one awaited, and its results are delivered as soon as it ends.
 * A step's start is when its admitted requests were scheduled; `lagMs` is always 0 (nothing is
 * due at a modelled time). Same surface and the same sink calls as the wall-clock driver, so
 * the request code does not know which runtime serves it.
 */
import type { EngineCounters, EngineRequest, StepResult } from '../types.ts';
import { SinkDriver } from './sinkDriver.ts';

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

export class StepLoopDriver extends SinkDriver {
  readonly #core: AsyncSteppableEngine;
  readonly #onStepEnd: StepLoopOptions['onStepEnd'];
  #loop: Promise<void> | null = null;

  constructor(core: AsyncSteppableEngine, options: StepLoopOptions = {}) {
    super(core, () => performance.now());
    this.#core = core;
    this.#onStepEnd = options.onStepEnd;
  }

  /** Resolves once no step is in flight (after close(): the loop has stopped). */
  async idle(): Promise<void> {
    await this.#loop;
  }

  protected wake(): void {
    if (this.#loop !== null || this.closed) return;
    this.#loop = this.#run().finally(() => {
      this.#loop = null;
    });
  }

  async #run(): Promise<void> {
    // Let the submitting request's handler finish its turn first (it registers its sinks).
    await new Promise<void>((resolve) => setImmediate(resolve));
    while (!this.closed && this.#core.hasWork()) {
      const startedMs = performance.now();
      let result: StepResult;
      try {
        result = await this.#core.step();
      } catch (err) {
        this.fail(err as Error);
        return;
      }
      this.stepCount++;
      if (this.closed) return;
      this.#deliver(result, startedMs);
      // Nothing computed: no progress until a request arrives or leaves.
      if (result.prefillTokens + result.decodeTokens === 0) return;
    }
  }

  #deliver(result: StepResult, startedMs: number): void {
    this.#onStepEnd?.(result, 0);
    this.sinks.deliver(result, () => startedMs);
  }
}
