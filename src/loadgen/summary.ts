/**
 * A live run's result from the client's measurements: the keys of `kvroute sim --json` that a
 * client can measure (policy and replicas come from flags and may be null), plus what only a
 * live run has (speedup, wall time, the client's send lag, the warm-fleet check), the SLO it was
 * judged by, and its requests over time for the report.
 */
import type { LiveRun } from '../results/result.ts';
import { meetsSlo, type SloTargets } from '../results/slo.ts';
import { cdfPoints, summarize } from '../results/stats.ts';
import { buildTimeline } from '../results/timeline.ts';
import type { BenchSample, Collector } from './collect.ts';
import { coldStartCheck } from './warmStart.ts';

export interface ResultMeta {
  policy: string | null;
  replicas: number | null;
  workload: string;
  durationS: number | null;
  warmupS: number;
  speedup: number;
  wallS: number;
  sendLagMs: number[];
  /** The targets the run is judged by (`sloMet`). */
  slo: SloTargets;
  /** The workload's watched customer (the hot one): its TTFT is reported apart. */
  watchedCustomer?: number | null;
}

export function buildResult(c: Collector, meta: ResultMeta): LiveRun {
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
  const ttftMs = summarize(s.map((v) => v.ttftMs));
  const tpotMs = summarize(tpot);
  return {
    policy: meta.policy,
    replicas: meta.replicas,
    workload: meta.workload,
    durationS: meta.durationS,
    warmupS: meta.warmupS,
    ttftMs,
    tpotMs,
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
    slo: meta.slo,
    sloMet: meetsSlo({ errors: c.errors, ttftMs, tpotMs }, meta.slo),
    timeline: buildTimeline(c.requests),
    coldStart: coldStartCheck(c.requests),
    ...(meta.watchedCustomer != null && { customers: watchedTtft(s, meta.watchedCustomer) }),
  };
}

/** The watched customer's TTFT and everyone else's, as the simulator reports them. */
function watchedTtft(
  s: readonly BenchSample[],
  watched: number,
): NonNullable<LiveRun['customers']> {
  const of = (keep: (v: BenchSample) => boolean) => {
    const ttft = s.filter(keep).map((v) => v.ttftMs);
    return ttft.length > 0 ? summarize(ttft) : null;
  };
  return {
    watched,
    watchedTtftMs: of((v) => v.customer === watched),
    othersTtftMs: of((v) => v.customer !== watched),
    perCustomerTtftP99Ms: null,
  };
}
