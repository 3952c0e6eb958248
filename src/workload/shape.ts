/**
 * Arrival shapes the benchmark harnesses send, laid over any workload's prompts (taken in the
 * workload's order, its own arrival times dropped):
 * - a rate ladder: stages of a Poisson rate for a duration, one after the other, as
 *   inference-perf's `load.stages` (`inference_perf/config/loadgen/config.py`,
 *   `StandardLoadStage`: `rate` QPS for `duration` seconds) and a sweep of vLLM's
 *   `bench serve --request-rate` do;
 * - a burst: the first N prompts all at time 0, as `vllm bench serve --request-rate inf` sends
 *   them (`vllm/benchmarks/serve.py` `get_request`: a delay of 0 for every request);
 * - a rate with burstiness: gamma gaps of mean 1 / rate (`vllm bench serve --request-rate R
 *   --burstiness F`, arrival.ts `interArrivalMs`) until the run's end. A ladder's stages take a
 *   burstiness too; 1 (the default) is Poisson, drawn exactly as before.
 * Pure: a function of the seed.
 */
import type { BlockKey } from '../kv/blockKey.ts';
import { Rng } from '../util/rng.ts';
import { type Arrival, interArrivalMs } from './arrival.ts';
import type { Materialized } from './tokens.ts';
import type { Workload } from './types.ts';

export interface LadderStage {
  ratePerS: number;
  durationS: number;
}

export type ArrivalShape =
  | { kind: 'ladder'; stages: readonly LadderStage[]; burstiness?: number }
  | { kind: 'burst'; requests: number }
  | { kind: 'gamma'; ratePerS: number; burstiness: number };

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

/**
 * How long the shape sends for, ms (a burst: 0, all at once; a rate: until the run's end,
 * Infinity).
 */
export function shapeDurationMs(shape: ArrivalShape): number {
  if (shape.kind === 'gamma') return Number.POSITIVE_INFINITY;
  return shape.kind === 'burst' ? 0 : (stageWindows(shape.stages).at(-1)?.endMs ?? 0);
}

/**
 * `inner`'s prompts in its order, at the shape's times; a rate's arrivals stop at `durationMs`
 * (undefined: when the prompts or the caller stop).
 */
export function shapeWorkload(
  inner: Workload,
  shape: ArrivalShape,
  seed: number,
  durationMs?: number,
): Workload {
  return new ShapedWorkload(inner, shape, seed, durationMs ?? Number.POSITIVE_INFINITY);
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
  readonly #durationMs: number;

  constructor(inner: Workload, shape: ArrivalShape, seed: number, durationMs: number) {
    this.#inner = inner;
    this.#shape = shape;
    this.#seed = seed;
    this.#durationMs = durationMs;
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
    if (shape.kind === 'gamma') {
      const gaps = Rng.derive(this.#seed, 'gamma:arrivals');
      const meanGapMs = 1000 / shape.ratePerS;
      const b = shape.burstiness;
      for (let atMs = interArrivalMs(gaps, meanGapMs, b); atMs < this.#durationMs; ) {
        const next = prompts.next();
        if (next.done) return;
        yield { ...next.value, atMs };
        atMs += interArrivalMs(gaps, meanGapMs, b);
      }
      return;
    }
    const gaps = Rng.derive(this.#seed, 'ladder:arrivals');
    const b = shape.burstiness ?? 1;
    for (const stage of stageWindows(shape.stages)) {
      // Each stage starts its own arrivals from its start (Poisson ones are memoryless).
      const meanGapMs = 1000 / stage.ratePerS;
      for (let atMs = stage.startMs + interArrivalMs(gaps, meanGapMs, b); atMs < stage.endMs; ) {
        const next = prompts.next();
        if (next.done) return;
        yield { ...next.value, atMs };
        atMs += interArrivalMs(gaps, meanGapMs, b);
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
