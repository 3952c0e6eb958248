/**
 * A run over time: its requests bucketed by arrival time, with the latencies, hit rate and
 * errors of each bucket, for the report's charts over time. A bucket without a measurement
 * holds NaN (the charts leave a gap).
 */
import { percentile } from './stats.ts';

export interface Timeline {
  bucketMs: number;
  /** Per bucket, from time 0: requests that arrived, and of them those that failed. */
  arrivals: number[];
  errors: number[];
  ttftP50Ms: number[];
  ttftP99Ms: number[];
  tpotP50Ms: number[];
  tpotP99Ms: number[];
  /** Cached prompt tokens / prompt tokens of the bucket's completed requests. */
  hitRate: number[];
}

export interface TimedRequest {
  arrivalMs: number;
  ttftMs: number | null;
  tpotMs: number | null;
  promptTokens: number;
  cachedTokens: number | null;
  error: string | null;
}

/** About 60 buckets over the run, whole seconds, at least one second. */
export function bucketMsFor(spanMs: number): number {
  return Math.max(1000, Math.round(spanMs / 60 / 1000) * 1000);
}

export function buildTimeline(requests: readonly TimedRequest[]): Timeline {
  const spanMs = requests.reduce((m, r) => Math.max(m, r.arrivalMs), 0);
  const bucketMs = bucketMsFor(spanMs);
  const n = Math.floor(spanMs / bucketMs) + 1;
  const buckets = Array.from({ length: n }, () => ({
    arrivals: 0,
    errors: 0,
    ttft: [] as number[],
    tpot: [] as number[],
    prompt: 0,
    cached: 0,
  }));
  for (const r of requests) {
    const b = buckets[Math.floor(r.arrivalMs / bucketMs)]!;
    b.arrivals++;
    if (r.error !== null) {
      b.errors++;
      continue;
    }
    if (r.ttftMs !== null) b.ttft.push(r.ttftMs);
    if (r.tpotMs !== null) b.tpot.push(r.tpotMs);
    if (r.cachedTokens !== null) {
      b.prompt += r.promptTokens;
      b.cached += r.cachedTokens;
    }
  }
  const sorted = (v: number[]) => Float64Array.from(v).sort();
  const ttft = buckets.map((b) => sorted(b.ttft));
  const tpot = buckets.map((b) => sorted(b.tpot));
  return {
    bucketMs,
    arrivals: buckets.map((b) => b.arrivals),
    errors: buckets.map((b) => b.errors),
    ttftP50Ms: ttft.map((v) => percentile(v, 0.5)),
    ttftP99Ms: ttft.map((v) => percentile(v, 0.99)),
    tpotP50Ms: tpot.map((v) => percentile(v, 0.5)),
    tpotP99Ms: tpot.map((v) => percentile(v, 0.99)),
    hitRate: buckets.map((b) => (b.prompt > 0 ? b.cached / b.prompt : Number.NaN)),
  };
}
