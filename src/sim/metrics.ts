/**
 * What a run measures. Per-request latencies are kept exactly (a few numbers per request);
 * inter-token gaps, one per output token, go into a log-bucketed histogram (0.5 % relative
 * resolution). Percentiles are nearest-rank: the value at rank ceil(p x n).
 */

export interface Percentiles {
  p50: number;
  p90: number;
  p99: number;
  mean: number;
  count: number;
}

/** Growable Float64Array. */
export class F64List {
  #data = new Float64Array(1024);
  #length = 0;

  get length(): number {
    return this.#length;
  }

  push(v: number): void {
    if (this.#length === this.#data.length) {
      const grown = new Float64Array(this.#data.length * 2);
      grown.set(this.#data);
      this.#data = grown;
    }
    this.#data[this.#length++] = v;
  }

  get(i: number): number {
    return this.#data[i]!;
  }

  toArray(): Float64Array {
    return this.#data.slice(0, this.#length);
  }
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

/** Busy time per replica, total and per time bucket (for utilization and load over time). */
export class BusyTracker {
  readonly #bucketMs: number;
  readonly #totals: Float64Array;
  readonly #buckets: Float64Array[];

  constructor(replicas: number, horizonMs: number, bucketMs: number) {
    this.#bucketMs = bucketMs;
    this.#totals = new Float64Array(replicas);
    const n = Math.max(1, Math.ceil(horizonMs / bucketMs));
    this.#buckets = Array.from({ length: replicas }, () => new Float64Array(n));
  }

  get bucketMs(): number {
    return this.#bucketMs;
  }

  /** Adds a busy interval [startMs, startMs + durationMs), split across buckets. */
  add(replica: number, startMs: number, durationMs: number): void {
    this.#totals[replica]! += durationMs;
    const buckets = this.#buckets[replica]!;
    let t = startMs;
    const end = startMs + durationMs;
    while (t < end) {
      const b = Math.floor(t / this.#bucketMs);
      if (b >= buckets.length) break;
      const bucketEnd = (b + 1) * this.#bucketMs;
      const upTo = Math.min(end, bucketEnd);
      buckets[b]! += upTo - t;
      t = upTo;
    }
  }

  /** Busy fraction of each replica over [0, wallMs). */
  utilization(wallMs: number): number[] {
    return Array.from(this.#totals, (busy) => (wallMs > 0 ? Math.min(1, busy / wallMs) : 0));
  }

  /** Per replica, busy fraction of each bucket up to `wallMs`. */
  loadSeries(wallMs: number): number[][] {
    const n = Math.max(1, Math.ceil(wallMs / this.#bucketMs));
    return this.#buckets.map((b) =>
      Array.from(b.subarray(0, n), (busy) => Math.min(1, busy / this.#bucketMs)),
    );
  }
}

/** One completed (or failed) request, as the report and the analyses need it. */
export interface RequestSample {
  arrivalMs: number;
  customer: number;
  replica: number;
  ttftMs: number;
  e2eMs: number;
  tpotMs: number;
  promptTokens: number;
  cachedTokens: number;
  rerouted: boolean;
}

/**
 * Per-request samples in columns (a handful of floats per request), plus the ITL histogram.
 * Only requests that arrive after the warm-up count towards latencies and the hit rate.
 */
export class RequestLog {
  readonly arrivalMs = new F64List();
  readonly customer = new F64List();
  readonly replica = new F64List();
  readonly ttftMs = new F64List();
  readonly e2eMs = new F64List();
  /** NaN for single-token requests (no TPOT). */
  readonly tpotMs = new F64List();
  readonly promptTokens = new F64List();
  readonly cachedTokens = new F64List();
  readonly rerouted = new F64List();
  readonly itlMs = new LogHistogram();

  add(s: RequestSample): void {
    this.arrivalMs.push(s.arrivalMs);
    this.customer.push(s.customer);
    this.replica.push(s.replica);
    this.ttftMs.push(s.ttftMs);
    this.e2eMs.push(s.e2eMs);
    this.tpotMs.push(s.tpotMs);
    this.promptTokens.push(s.promptTokens);
    this.cachedTokens.push(s.cachedTokens);
    this.rerouted.push(s.rerouted ? 1 : 0);
  }

  get length(): number {
    return this.arrivalMs.length;
  }

  /** Values of `column` for the samples `keep` accepts. */
  select(column: F64List, keep: (i: number) => boolean): number[] {
    const out: number[] = [];
    for (let i = 0; i < column.length; i++) if (keep(i)) out.push(column.get(i));
    return out;
  }

  hitRate(keep: (i: number) => boolean): number {
    let prompt = 0;
    let cached = 0;
    for (let i = 0; i < this.length; i++) {
      if (!keep(i)) continue;
      prompt += this.promptTokens.get(i);
      cached += this.cachedTokens.get(i);
    }
    return prompt > 0 ? cached / prompt : 0;
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
