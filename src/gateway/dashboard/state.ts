/**
 * What the dashboard shows, as plain data: a sample of the fleet taken every second (the
 * router's snapshot and the gateway's running totals) and the point of the time series made
 * from two consecutive samples. `sampleGateway` assembles a sample from one router and the
 * metrics; a gateway with several routers concatenates their replicas and adds their totals.
 */
import type { ReplicaSnapshot } from '../../router/index.ts';
import type { GatewayMetrics } from '../../serving/metrics.ts';

/** TTFT percentiles in the series are over this much of the recent past. */
export const TTFT_WINDOW_MS = 10_000;

export interface ReplicaRow {
  name: string;
  healthy: boolean;
  /** The router's guard verdict: eligible, down, stale or kv-full. */
  verdict: string | null;
  /** 0..1 from the replica's last report; null before its first. */
  kvUsage: number | null;
  /** The router's ledger: uncached prompt tokens routed there, first token not back yet. */
  queuedPromptTokens: number;
  running: number | null;
  waiting: number | null;
  inFlight: number;
  indexedBlocks: number;
  /** Running totals of what the router sent there. */
  decisions: number;
  cachedTokens: number;
  uncachedTokens: number;
  spills: number;
  /** The cache audit's verdict, its window's prediction error and index source; null: none. */
  audit?: { verdict: string; hitRateError: number | null; indexSource: string } | null;
}

/** A replica as the pools' snapshot gives it (the audit is the gateway's, not the router's). */
type SampledReplica = ReplicaSnapshot & {
  audit?: { verdict: string; hitRateError: number | null; indexSource: string };
};

export interface DashboardSample {
  /** Wall clock, ms since the epoch. */
  atMs: number;
  replicas: ReplicaRow[];
  /** Running totals. */
  decisionsByPolicy: Record<string, number>;
  /** TTFT over the last TTFT_WINDOW_MS, ms. */
  ttftP50Ms: number | null;
  ttftP99Ms: number | null;
}

export interface DashboardPoint {
  atMs: number;
  decisionsPerS: Record<string, number>;
  /** Cached / routed prompt tokens over the interval; null when nothing was routed. */
  hitRate: number | null;
  ttftP50Ms: number | null;
  ttftP99Ms: number | null;
  queuedPromptTokens: Record<string, number>;
}

/** One router's replicas and the metrics' totals, at `atMs` (wall) / `nowMs` (performance). */
export function sampleGateway(
  snapshot: { replicas: SampledReplica[] },
  metrics: GatewayMetrics,
  atMs: number,
  nowMs: number,
): DashboardSample {
  const ttft = metrics.recentTtft.percentiles(nowMs - TTFT_WINDOW_MS);
  return {
    atMs,
    replicas: snapshot.replicas.map((r) => {
      const tally = metrics.replicaTally.get(r.name);
      return {
        name: r.name,
        healthy: r.healthy,
        verdict: r.verdict,
        kvUsage: r.kvUsage,
        queuedPromptTokens: r.queuedPromptTokens,
        running: r.running,
        waiting: r.waiting,
        inFlight: r.inFlight,
        indexedBlocks: r.indexedBlocks,
        decisions: tally?.decisions ?? 0,
        cachedTokens: tally?.cachedTokens ?? 0,
        uncachedTokens: tally?.uncachedTokens ?? 0,
        spills: tally?.spills ?? 0,
        audit: r.audit
          ? {
              verdict: r.audit.verdict,
              hitRateError: r.audit.hitRateError,
              indexSource: r.audit.indexSource,
            }
          : null,
      };
    }),
    decisionsByPolicy: Object.fromEntries(metrics.policyDecisions),
    ttftP50Ms: ttft.p50 === null ? null : ttft.p50 * 1000,
    ttftP99Ms: ttft.p99 === null ? null : ttft.p99 * 1000,
  };
}

/** The series point between two samples (rates over the interval between them). */
export function pointBetween(prev: DashboardSample | null, cur: DashboardSample): DashboardPoint {
  const seconds = prev === null ? 0 : Math.max(1e-3, (cur.atMs - prev.atMs) / 1000);
  const decisionsPerS: Record<string, number> = {};
  for (const [policy, total] of Object.entries(cur.decisionsByPolicy)) {
    // A policy new since `prev` made all its decisions in the interval.
    const before = prev === null ? total : (prev.decisionsByPolicy[policy] ?? 0);
    decisionsPerS[policy] = seconds > 0 ? (total - before) / seconds : 0;
  }
  const totals = (s: DashboardSample | null) => {
    let cached = 0;
    let routed = 0;
    for (const r of s?.replicas ?? []) {
      cached += r.cachedTokens;
      routed += r.cachedTokens + r.uncachedTokens;
    }
    return { cached, routed };
  };
  const a = totals(prev);
  const b = totals(cur);
  const routed = prev === null ? 0 : b.routed - a.routed;
  return {
    atMs: cur.atMs,
    decisionsPerS,
    hitRate: routed > 0 ? (b.cached - a.cached) / routed : null,
    ttftP50Ms: cur.ttftP50Ms,
    ttftP99Ms: cur.ttftP99Ms,
    queuedPromptTokens: Object.fromEntries(cur.replicas.map((r) => [r.name, r.queuedPromptTokens])),
  };
}
