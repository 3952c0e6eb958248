/**
 * Arrival shapes the benchmark harnesses send, laid over any workload's prompts (taken in the
 * workload's order, its own arrival times dropped):
 * - a rate ladder: stages of a Poisson rate for a duration, one after the other, as
 *   inference-perf's `load.stages` (`inference_perf/config/loadgen/config.py`,
 *   `StandardLoadStage`: `rate` QPS for `duration` seconds) and a sweep of vLLM's
 *   `bench serve --request-rate` do;
 * - a burst: the first N prompts all at time 0, as `vllm bench serve --request-rate inf` sends
 *   them (`vllm/benchmarks/serve.py` `get_request`: a delay of 0 for every request).
 * Pure: a function of the seed.
 */
import type { BlockKey } from '../kv/blockKey.ts';
import { Rng } from '../util/rng.ts';
import type { Arrival } from './arrival.ts';
import type { Materialized } from './tokens.ts';
import type { Workload } from './workloads.ts';

export interface LadderStage {
  ratePerS: number;
  durationS: number;
}

export type ArrivalShape =
  | { kind: 'ladder'; stages: readonly LadderStage[] }
  | { kind: 'burst'; requests: number };

/** A stage's window on the run's clock: [startMs, endMs). */
export interface StageWindow {
  ratePerS: number;
  startMs: number;
  endMs: number;
}

/** The ladder's stages as windows, back to back from 0. */
export function stageWindows(stages: readonly LadderStage[]): StageWindow[] {
  let startMs = 0;
  return stages.map((s) => {
    const w = { ratePerS: s.ratePerS, startMs, endMs: startMs + s.durationS * 1000 };
    startMs = w.endMs;
    return w;
  });
}

/** How long the shape sends for, ms (a burst: 0, all at once). */
export function shapeDurationMs(shape: ArrivalShape): number {
  return shape.kind === 'burst' ? 0 : (stageWindows(shape.stages).at(-1)?.endMs ?? 0);
}

/** `inner`'s prompts in its order, at the shape's times. */
export function shapeWorkload(inner: Workload, shape: ArrivalShape, seed: number): Workload {
  return new ShapedWorkload(inner, shape, seed);
}

class ShapedWorkload implements Workload {
  readonly name: string;
  readonly blockSize: number;
  readonly customers: number;
  readonly watchedCustomer: number | null;
  readonly adapters?: number;
  readonly #inner: Workload;
  readonly #shape: ArrivalShape;
  readonly #seed: number;

  constructor(inner: Workload, shape: ArrivalShape, seed: number) {
    this.#inner = inner;
    this.#shape = shape;
    this.#seed = seed;
    this.name = inner.name;
    this.blockSize = inner.blockSize;
    this.customers = inner.customers;
    this.watchedCustomer = inner.watchedCustomer;
    if (inner.adapters !== undefined) this.adapters = inner.adapters;
  }

  *arrivals(): Iterator<Arrival> {
    const prompts = this.#inner.arrivals();
    const shape = this.#shape;
    if (shape.kind === 'burst') {
      for (let i = 0; i < shape.requests; i++) {
        const next = prompts.next();
        if (next.done) return;
        yield { ...next.value, atMs: 0 };
      }
      return;
    }
    const gaps = Rng.derive(this.#seed, 'ladder:arrivals');
    for (const stage of stageWindows(shape.stages)) {
      // Poisson arrivals are memoryless: each stage starts its own from its start.
      const meanGapMs = 1000 / stage.ratePerS;
      for (let atMs = stage.startMs + gaps.exponential(meanGapMs); atMs < stage.endMs; ) {
        const next = prompts.next();
        if (next.done) return;
        yield { ...next.value, atMs };
        atMs += gaps.exponential(meanGapMs);
      }
    }
  }

  materialize(arrival: Arrival): Materialized {
    return this.#inner.materialize(arrival);
  }

  prefixWatchKey(customer: number): BlockKey | null {
    return this.#inner.prefixWatchKey(customer);
  }
}
