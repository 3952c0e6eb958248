/**
 * Recent latencies for the dashboard: the last `capacity` observations with their times, and
 * percentiles over those within a window. Prometheus histograms answer the same question over
 * any range, but only through a Prometheus; the dashboard reads this one directly.
 */
import { percentile } from '../results/stats.ts';

export interface WindowPercentiles {
  count: number;
  p50: number | null;
  p99: number | null;
}

export class LatencyWindow {
  readonly #atMs: Float64Array;
  readonly #values: Float64Array;
  #next = 0;
  #size = 0;

  constructor(capacity = 4096) {
    this.#atMs = new Float64Array(capacity);
    this.#values = new Float64Array(capacity);
  }

  add(atMs: number, value: number): void {
    this.#atMs[this.#next] = atMs;
    this.#values[this.#next] = value;
    this.#next = (this.#next + 1) % this.#values.length;
    this.#size = Math.min(this.#size + 1, this.#values.length);
  }

  /** Nearest-rank p50 and p99 of the observations made after `sinceMs`. */
  percentiles(sinceMs: number): WindowPercentiles {
    const recent: number[] = [];
    for (let i = 0; i < this.#size; i++) {
      if (this.#atMs[i]! > sinceMs) recent.push(this.#values[i]!);
    }
    if (recent.length === 0) return { count: 0, p50: null, p99: null };
    const sorted = Float64Array.from(recent).sort();
    return { count: sorted.length, p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99) };
  }
}
