/**
 * Latency statistics every run reports, simulated or live. Per-request latencies are kept exactly
 * and summarized by nearest-rank percentiles (the value at rank ceil(p x n)); inter-token gaps,
 * one per output token, go into a log-bucketed histogram (0.5 % relative resolution).
 */

export interface Percentiles {
  p50: number;
  p90: number;
  p99: number;
  mean: number;
  count: number;
}

/** Nearest-rank percentile of ascending `sorted`; NaN when empty. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  const n = sorted.length;
  if (n === 0) return Number.NaN;
  const rank = Math.max(1, Math.ceil(p * n));
  return sorted[Math.min(n, rank) - 1]!;
}

export function summarize(values: ArrayLike<number>): Percentiles {
  const sorted = Float64Array.from(values as ArrayLike<number>).sort();
  let sum = 0;
  for (let i = 0; i < sorted.length; i++) sum += sorted[i]!;
  return {
    p50: percentile(sorted, 0.5),
    p90: percentile(sorted, 0.9),
    p99: percentile(sorted, 0.99),
    mean: sorted.length ? sum / sorted.length : Number.NaN,
    count: sorted.length,
  };
}

/** Log-bucketed histogram from 1 µs up; a bucket's value is its geometric midpoint. */
export class LogHistogram {
  static readonly MIN = 1e-3;
  static readonly GROWTH = 1.01;
  readonly #counts: Float64Array;
  readonly #logGrowth = Math.log(LogHistogram.GROWTH);
  #count = 0;
  #sum = 0;
  /** The last value added and its bucket: every decode of one step adds the same gap. */
  #lastValue = Number.NaN;
  #lastBucket = 0;

  constructor(maxValue = 1e7) {
    this.#counts = new Float64Array(this.#bucket(maxValue) + 2);
  }

  #bucket(v: number): number {
    if (v <= LogHistogram.MIN) return 0;
    return 1 + Math.floor(Math.log(v / LogHistogram.MIN) / this.#logGrowth);
  }

  add(v: number): void {
    if (v !== this.#lastValue) {
      this.#lastValue = v;
      this.#lastBucket = Math.min(this.#bucket(v), this.#counts.length - 1);
    }
    const b = this.#lastBucket;
    this.#counts[b]!++;
    this.#count++;
    this.#sum += v;
  }

  quantile(p: number): number {
    if (this.#count === 0) return Number.NaN;
    const rank = Math.max(1, Math.ceil(p * this.#count));
    let seen = 0;
    for (let b = 0; b < this.#counts.length; b++) {
      seen += this.#counts[b]!;
      if (seen >= rank) {
        if (b === 0) return LogHistogram.MIN;
        return LogHistogram.MIN * LogHistogram.GROWTH ** (b - 0.5);
      }
    }
    return Number.NaN;
  }

  summary(): Percentiles {
    return {
      p50: this.quantile(0.5),
      p90: this.quantile(0.9),
      p99: this.quantile(0.99),
      mean: this.#count ? this.#sum / this.#count : Number.NaN,
      count: this.#count,
    };
  }
}

/** Up to `points` (value, cumulative fraction) pairs of the empirical CDF, for charts. */
export function cdfPoints(values: number[], points = 200): [number, number][] {
  const sorted = Float64Array.from(values).sort();
  const n = sorted.length;
  if (n === 0) return [];
  const out: [number, number][] = [];
  const step = Math.max(1, Math.floor(n / points));
  for (let i = 0; i < n; i += step) out.push([sorted[i]!, (i + 1) / n]);
  out.push([sorted[n - 1]!, 1]);
  return out;
}
