/** Turns a fleet run's raw log into the plain-data result the CLI, report and search use. */
import type { FleetOutcome } from './fleet.ts';
import type { FaultImpact, RunResult, SimulatedRun } from '../results/result.ts';
import { meetsSlo, type SloTargets } from '../results/slo.ts';
import { cdfPoints, percentile, summarize } from '../results/stats.ts';

/** Window either side of a fault for the before / after comparison. */
const FAULT_WINDOW_MS = 60_000;

export interface SummaryInput {
  policy: string;
  replicas: number;
  workload: string;
  durationMs: number;
  warmupMs: number;
  slo: SloTargets;
  sampleMs: number;
  /** A cold prompt's time to first token on an idle replica (the slowdown SLO's reference). */
  idleTtftMs: (promptTokens: number) => number;
}

export function summarizeRun(input: SummaryInput, out: FleetOutcome): SimulatedRun {
  const log = out.log;
  const all = (): boolean => true;
  const ttft = log.select(log.ttftMs, all);
  const tpot = log.select(log.tpotMs, all).filter((v) => !Number.isNaN(v));
  const ttftMs = summarize(ttft);
  const tpotMs = summarize(tpot);
  const wallMs = Math.max(input.durationMs, out.endMs);
  const perReplica = out.busy.utilization(wallMs);
  const errors = Object.values(out.errorsByKind).reduce((a, b) => a + b, 0);
  const watched = out.owners.watched;
  const byCustomer = (keep: (c: number) => boolean) => {
    const v = log.select(log.ttftMs, (i) => keep(log.customer.get(i)));
    return v.length > 0 ? summarize(v) : null;
  };
  // Only with a slowdown SLO, so a run judged by a fixed one prints what it always printed.
  const ttftSlowdown =
    input.slo.ttftSlowdown === undefined ? undefined : slowdowns(log, input.idleTtftMs);
  const sloMet = !out.stoppedEarly && meetsSlo({ errors, ttftMs, tpotMs, ttftSlowdown }, input.slo);
  return {
    policy: input.policy,
    replicas: input.replicas,
    workload: input.workload,
    durationS: input.durationMs / 1000,
    warmupS: input.warmupMs / 1000,
    ttftMs,
    ...(ttftSlowdown !== undefined && { ttftSlowdown }),
    tpotMs,
    itlMs: log.itlMs.summary(),
    e2eMs: summarize(log.select(log.e2eMs, all)),
    hitRate: log.hitRate(all),
    arrived: out.arrived,
    completed: out.completed,
    errors,
    errorsByKind: out.errorsByKind,
    rerouted: out.rerouted,
    utilization: {
      mean: perReplica.reduce((a, b) => a + b, 0) / Math.max(1, perReplica.length),
      min: Math.min(...perReplica),
      max: Math.max(...perReplica),
      perReplica,
    },
    customers: {
      watched,
      watchedTtftMs: watched === null ? null : byCustomer((c) => c === watched),
      othersTtftMs: watched === null ? null : byCustomer((c) => c !== watched),
      perCustomerTtftP99Ms: perCustomer(out),
    },
    owners: {
      sampleMs: input.sampleMs,
      watched: out.owners.watchedSeries,
      meanAll: out.owners.meanSeries,
    },
    load: { bucketMs: out.load.bucketMs, ...out.load.series(wallMs) },
    ttftCdf: cdfPoints(ttft),
    faults: out.faultLog.map((f) => faultImpact(out, f)),
    slo: input.slo,
    sloMet,
    stoppedEarly: out.stoppedEarly,
    engineSteps: out.engineSteps,
    events: out.events,
    router: out.routerStats,
  };
}

/** Per measured request, TTFT over its cold prompt's TTFT on an idle replica. */
function slowdowns(log: FleetOutcome['log'], idleTtftMs: (promptTokens: number) => number) {
  const ratios = new Float64Array(log.length);
  for (let i = 0; i < log.length; i++) {
    ratios[i] = log.ttftMs.get(i) / idleTtftMs(log.promptTokens.get(i));
  }
  return summarize(ratios);
}

/** TTFT p99 per customer, summarized over customers (the median one and the worst one). */
function perCustomer(
  out: FleetOutcome,
): NonNullable<RunResult['customers']>['perCustomerTtftP99Ms'] {
  const log = out.log;
  const byCustomer = new Map<number, number[]>();
  for (let i = 0; i < log.length; i++) {
    const c = log.customer.get(i);
    if (c < 0) continue;
    let list = byCustomer.get(c);
    if (list === undefined) byCustomer.set(c, (list = []));
    list.push(log.ttftMs.get(i));
  }
  const p99s: [number, number][] = [];
  for (const [c, v] of byCustomer) {
    if (v.length >= 20) p99s.push([c, percentile(Float64Array.from(v).sort(), 0.99)]);
  }
  if (p99s.length === 0) return null;
  p99s.sort((a, b) => a[1] - b[1] || a[0] - b[0]);
  const worst = p99s.at(-1)!;
  return {
    customers: p99s.length,
    p50: percentile(
      Float64Array.from(p99s, (x) => x[1]),
      0.5,
    ),
    max: worst[1],
    worst: worst[0],
  };
}

/** What the dead replica's customers saw: TTFT before, on their first request after, later. */
function faultImpact(out: FleetOutcome, f: FleetOutcome['faultLog'][number]): FaultImpact {
  const log = out.log;
  const customers = new Set(f.customers);
  const atMs = f.fault.atMs;
  const before: number[] = [];
  const firstAfter: number[] = [];
  const later: number[] = [];
  const seen = new Set<number>();
  // The log is in completion order; visit requests in arrival order.
  const order = Array.from({ length: log.length }, (_, i) => i).sort(
    (a, b) => log.arrivalMs.get(a) - log.arrivalMs.get(b) || a - b,
  );
  for (const i of order) {
    const c = log.customer.get(i);
    if (!customers.has(c)) continue;
    const t = log.arrivalMs.get(i);
    const v = log.ttftMs.get(i);
    if (t < atMs) {
      // Requests stranded by the fault were re-routed: they belong to neither side.
      if (t >= atMs - FAULT_WINDOW_MS && log.rerouted.get(i) === 0) before.push(v);
    } else if (t < atMs + FAULT_WINDOW_MS) {
      if (seen.has(c)) later.push(v);
      else {
        seen.add(c);
        firstAfter.push(v);
      }
    }
  }
  const p50 = (v: number[]) => percentile(Float64Array.from(v).sort(), 0.5);
  return {
    kind: f.fault.kind,
    replica: f.fault.replica,
    atMs,
    customers: customers.size,
    sharedCustomers: f.sharedCustomers,
    rerouted: f.rerouted,
    errors: f.errors,
    ttftBeforeP50Ms: p50(before),
    ttftFirstAfterP50Ms: p50(firstAfter),
    ttftLaterP50Ms: p50(later),
  };
}
