import type { Rng } from '../util/rng.ts';

/** One request of a workload, before its tokens are made. */
export interface Arrival {
  /** Arrival time, ms from the start of the run. */
  atMs: number;
  /** Customer, prefix group or conversation; -1 when the workload has none. */
  customer: number;
  promptLength: number;
  outputTokens: number;
  /** Seed of the request's own tokens. */
  seed: number;
  /** Mooncake trace: the record's 512-token block hash ids. */
  hashIds?: readonly number[];
  /** The LoRA adapter the request runs with (its `model`); absent: the base model. */
  lora?: string;
}

/** The lengths of a load whose prompts are a shared prefix and a part of their own. */
export interface LoadLengths {
  sharedTokens: number;
  uniqueTokens: number;
  outputTokens: number;
}

/** An arrival of such a load: the same lengths for every request, its own token seed. */
export function loadArrival(
  atMs: number,
  customer: number,
  load: LoadLengths,
  seed: number,
): Arrival {
  return {
    atMs,
    customer,
    promptLength: load.sharedTokens + load.uniqueTokens,
    outputTokens: load.outputTokens,
    seed,
  };
}

/**
 * A gap between arrivals of mean `meanGapMs`, as `vllm bench serve --burstiness` draws them
 * (vllm/benchmarks/serve.py, `get_request`: `np.random.gamma(shape=burstiness, scale=theta)`
 * with `theta = 1 / (request_rate * burstiness)`): gamma with shape `burstiness` and scale
 * `meanGapMs / burstiness`, so the mean stays 1 / rate and the coefficient of variation is
 * 1 / sqrt(burstiness). Burstiness 1 is the Poisson process's exponential gap, drawn as
 * `Rng.exponential` draws it (one uniform), so a run at 1 keeps its arrivals draw for draw;
 * below 1 arrivals bunch, above 1 they even out. Pure: a function of `rng`'s stream.
 */
export function interArrivalMs(rng: Rng, meanGapMs: number, burstiness = 1): number {
  if (burstiness === 1) return rng.exponential(meanGapMs);
  return gammaSample(rng, burstiness) * (meanGapMs / burstiness);
}

/**
 * Gamma(shape, 1) by Marsaglia and Tsang's method ("A simple method for generating gamma
 * variables", ACM TOMS 26(3), 2000): a squeezed rejection from a cubed normal for shape >= 1;
 * below 1, Gamma(shape + 1) x U^(1 / shape) (their section 6). Normals by Box-Muller.
 */
export function gammaSample(rng: Rng, shape: number): number {
  if (!(shape > 0)) throw new RangeError(`gamma shape must be > 0, got ${shape}`);
  if (shape < 1) {
    const u = 1 - rng.next(); // (0, 1]
    return gammaSample(rng, shape + 1) * u ** (1 / shape);
  }
  const d = shape - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  for (;;) {
    let x: number;
    let v: number;
    do {
      x = normalSample(rng);
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const u = 1 - rng.next(); // (0, 1]
    if (u < 1 - 0.0331 * x ** 4) return d * v;
    if (Math.log(u) < 0.5 * x * x + d * (1 - v + Math.log(v))) return d * v;
  }
}

/** A standard normal by Box-Muller (one of its pair: each call draws two uniforms). */
function normalSample(rng: Rng): number {
  const u1 = 1 - rng.next(); // (0, 1]: its log is finite
  const u2 = rng.next();
  return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
}
