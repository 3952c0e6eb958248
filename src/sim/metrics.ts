/**
 * What a simulated run measures: per-request samples in columns (a few numbers per request), busy
 * time per replica. Statistics over them are `src/results/stats.ts`'s.
 */
import { LogHistogram } from '../results/stats.ts';

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

/** Busy time per replica (for utilization). */
export class BusyTracker {
  #totals: Float64Array;

  constructor(replicas: number) {
    this.#totals = new Float64Array(replicas);
  }

  /** Room for `replicas` replicas (a fleet that grows mid-run); the totals so far are kept. */
  ensureReplicas(replicas: number): void {
    if (replicas <= this.#totals.length) return;
    const totals = new Float64Array(replicas);
    totals.set(this.#totals);
    this.#totals = totals;
  }

  /** Adds a busy interval of `durationMs`. */
  add(replica: number, durationMs: number): void {
    this.#totals[replica]! += durationMs;
  }

  /** Busy fraction of each replica over [0, wallMs). */
  utilization(wallMs: number): number[] {
    return Array.from(this.#totals, (busy) => (wallMs > 0 ? Math.min(1, busy / wallMs) : 0));
  }
}

/**
 * What each replica holds over time, for the report's heat maps: queued prompt tokens (routed
 * there, first token not back yet) and KV usage, each the mean of the report ticks in a bucket.
 */
export class LoadSampler {
  readonly #bucketMs: number;
  readonly #buckets: number;
  readonly #queued: Float64Array[];
  readonly #kv: Float64Array[];
  readonly #samples: Float64Array[];

  constructor(replicas: number, horizonMs: number, bucketMs: number) {
    this.#bucketMs = bucketMs;
    this.#buckets = Math.max(1, Math.ceil(horizonMs / bucketMs));
    const make = () => Array.from({ length: replicas }, () => new Float64Array(this.#buckets));
    this.#queued = make();
    this.#kv = make();
    this.#samples = make();
  }

  get bucketMs(): number {
    return this.#bucketMs;
  }

  /** Room for `replicas` replicas (a fleet that grows mid-run): rows for the new ones. */
  ensureReplicas(replicas: number): void {
    for (const rows of [this.#queued, this.#kv, this.#samples]) {
      while (rows.length < replicas) rows.push(new Float64Array(this.#buckets));
    }
  }

  add(replica: number, nowMs: number, queuedPromptTokens: number, kvUsage: number): void {
    const b = Math.floor(nowMs / this.#bucketMs);
    if (b >= this.#buckets) return;
    this.#queued[replica]![b]! += queuedPromptTokens;
    this.#kv[replica]![b]! += kvUsage;
    this.#samples[replica]![b]! += 1;
  }

  /** Per replica, each bucket's means up to `wallMs`; NaN where the replica was down. */
  series(wallMs: number): { queuedPromptTokens: number[][]; kvUsage: number[][] } {
    const n = Math.min(this.#buckets, Math.max(1, Math.ceil(wallMs / this.#bucketMs)));
    const mean = (sums: Float64Array[]) =>
      sums.map((row, r) =>
        Array.from(row.subarray(0, n), (v, b) => {
          const count = this.#samples[r]![b]!;
          return count > 0 ? v / count : Number.NaN;
        }),
      );
    return { queuedPromptTokens: mean(this.#queued), kvUsage: mean(this.#kv) };
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
