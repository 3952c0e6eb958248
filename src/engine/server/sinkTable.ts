/**
 * The requests a driver serves and one step's results delivered to them, shared by both drivers
 * (the wall-clock one and the step loop) so that the request code sees the same sink calls
 * whichever runtime serves it: admitted requests first (with when their step began and how much
 * of their prompt was cached), then tokens, then finishes.
 */
import type { StepPlan } from '../../scheduler/types.ts';
import type { StepResult } from '../types.ts';
import type { RequestSink } from './requestSink.ts';

export class SinkTable {
  readonly #sinks = new Map<string, RequestSink>();
  /** Aborts a request in the core (a sink that threw loses its request). */
  readonly #abort: (id: string) => void;

  constructor(abort: (id: string) => void) {
    this.#abort = abort;
  }

  add(id: string, sink: RequestSink): void {
    this.#sinks.set(id, sink);
  }

  /** False when `id` has no sink (finished, aborted or unknown). */
  delete(id: string): boolean {
    return this.#sinks.delete(id);
  }

  clear(): void {
    this.#sinks.clear();
  }

  /** The core failed: every request is told, and none is served any more. */
  failAll(err: Error): void {
    const sinks = [...this.#sinks.values()];
    this.#sinks.clear();
    for (const sink of sinks) sink.onFail(err);
  }

  /** Delivers one step's results; `startedMs` is read only when the step admitted requests. */
  deliver(result: StepResult, startedMs: () => number): void {
    const plan = result.plan as Partial<StepPlan> | undefined;
    if (plan?.admitted && plan.admitted.length > 0) this.#admitted(plan as StepPlan, startedMs());
    for (const token of result.emitted) {
      const sink = this.#sinks.get(token.id);
      if (sink) this.#guard(token.id, sink, () => sink.onToken(token.index, token.tokenId));
    }
    for (const fin of result.finished) {
      const sink = this.#sinks.get(fin.id);
      if (!sink) continue;
      this.#sinks.delete(fin.id);
      this.#guard(fin.id, sink, () => sink.onFinish(fin));
    }
  }

  /** Tells the sinks of admitted requests when and with how much of their prompt cached. */
  #admitted(plan: StepPlan, startedMs: number): void {
    const admitted = new Set(plan.admitted);
    // An admitted request's first chunk reads only its cached prefix as context.
    for (const entry of plan.entries) {
      if (entry.kind !== 'prefill' || !admitted.delete(entry.id)) continue;
      const sink = this.#sinks.get(entry.id);
      if (sink?.onScheduled) {
        this.#guard(entry.id, sink, () => sink.onScheduled!(startedMs, entry.contextTokens));
      }
    }
  }

  /** A sink that throws loses its request, not the engine: the core is still sound. */
  #guard(id: string, sink: RequestSink, deliver: () => void): void {
    try {
      deliver();
    } catch (err) {
      if (this.#sinks.delete(id)) this.#abort(id);
      try {
        sink.onFail(err as Error);
      } catch {
        // Nothing more can be told to this request.
      }
    }
  }
}
