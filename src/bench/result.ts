/**
 * The bench result: the keys of `kvroute sim --json` that a client can measure (policy and
 * replicas come from flags and may be null), plus what only a live run has (speedup, wall
 * time, the client's send lag). `toPolicyResult` fills the simulator-only fields with empty
 * values so the simulator's table and HTML report render bench results unchanged.
 */
import { DEFAULT_SLO } from '../sim/run.ts';
import { cdfPoints, type Percentiles, summarize } from '../sim/metrics.ts';
import type { PolicyResult } from '../sim/types.ts';
import type { Collector } from './collect.ts';

export interface BenchResult {
  policy: string | null;
  replicas: number | null;
  workload: string;
  durationS: number;
  warmupS: number;
  ttftMs: Percentiles;
  tpotMs: Percentiles;
  itlMs: Percentiles;
  e2eMs: Percentiles;
  /** Cached / prompt tokens of measured requests; null when the server reports no cache use. */
  hitRate: number | null;
  arrived: number;
  completed: number;
  errors: number;
  errorsByKind: Record<string, number>;
  /** Stopped by Ctrl-C while in flight (not errors). */
  cancelled: number;
  /** Measured latencies were multiplied by this (the engines' --speedup). */
  speedup: number;
  wallS: number;
  /** How late requests left after their scheduled time, wall ms: large = client overloaded. */
  sendLagMs: Percentiles;
  /** Requests whose prompt the server counted differently from the workload's length. */
  promptMismatches: number;
  /** TTFT CDF points [ms, fraction], for the report (left out of --json). */
  ttftCdf: [number, number][];
}

export interface ResultMeta {
  policy: string | null;
  replicas: number | null;
  workload: string;
  durationS: number;
  warmupS: number;
  speedup: number;
  wallS: number;
  sendLagMs: number[];
}

export function buildResult(c: Collector, meta: ResultMeta): BenchResult {
  const s = c.samples;
  const tpot = s.map((v) => v.tpotMs).filter((v) => !Number.isNaN(v));
  let prompt = 0;
  let cached = 0;
  let reported = false;
  for (const v of s) {
    prompt += v.promptTokens;
    if (v.cachedTokens !== null) {
      reported = true;
      cached += v.cachedTokens;
    }
  }
  return {
    policy: meta.policy,
    replicas: meta.replicas,
    workload: meta.workload,
    durationS: meta.durationS,
    warmupS: meta.warmupS,
    ttftMs: summarize(s.map((v) => v.ttftMs)),
    tpotMs: summarize(tpot),
    itlMs: c.itlMs.summary(),
    e2eMs: summarize(s.map((v) => v.e2eMs)),
    hitRate: reported && prompt > 0 ? cached / prompt : null,
    arrived: c.arrived,
    completed: c.completed,
    errors: c.errors,
    errorsByKind: { ...c.errorsByKind },
    cancelled: c.cancelled,
    speedup: meta.speedup,
    wallS: meta.wallS,
    sendLagMs: summarize(meta.sendLagMs),
    promptMismatches: c.promptMismatches,
    ttftCdf: cdfPoints(s.map((v) => v.ttftMs)),
  };
}

/** JSON as `kvroute sim --json` writes it: `{"results": [...]}`, CDF left out. */
export function resultsJson(results: BenchResult[]): string {
  const slim = results.map(({ ttftCdf: _cdf, ...rest }) => rest);
  return JSON.stringify({ results: slim }, jsonNumbers);
}

/** Rounds floats (µs resolution) and writes non-finite numbers as null, as sim does. */
function jsonNumbers(_key: string, value: unknown): unknown {
  if (typeof value !== 'number') return value;
  if (!Number.isFinite(value)) return null;
  return Number.isInteger(value) ? value : Math.round(value * 1000) / 1000;
}

/** A PolicyResult view of a bench result, for the simulator's table and report. */
export function toPolicyResult(r: BenchResult): PolicyResult {
  const sloMet =
    r.errors === 0 &&
    r.ttftMs.count > 0 &&
    r.ttftMs.p99 <= DEFAULT_SLO.ttftP99Ms &&
    (r.tpotMs.count === 0 || r.tpotMs.p99 <= DEFAULT_SLO.tpotP99Ms);
  return {
    policy: r.policy ?? 'bench',
    replicas: r.replicas ?? Number.NaN,
    workload: r.workload,
    durationS: r.durationS,
    warmupS: r.warmupS,
    ttftMs: r.ttftMs,
    tpotMs: r.tpotMs,
    itlMs: r.itlMs,
    e2eMs: r.e2eMs,
    hitRate: r.hitRate ?? Number.NaN,
    arrived: r.arrived,
    completed: r.completed,
    errors: r.errors,
    errorsByKind: r.errorsByKind,
    rerouted: 0,
    utilization: { mean: Number.NaN, min: Number.NaN, max: Number.NaN, perReplica: [] },
    customers: {
      watched: null,
      watchedTtftMs: null,
      othersTtftMs: null,
      perCustomerTtftP99Ms: null,
    },
    owners: { sampleMs: 0, watched: [], meanAll: [] },
    load: { bucketMs: 1000, perReplica: [] },
    ttftCdf: r.ttftCdf,
    faults: [],
    slo: { ...DEFAULT_SLO },
    sloMet,
    stoppedEarly: false,
    engineSteps: 0,
    events: 0,
    router: {},
  };
}
