/**
 * `kvroute sim --planner`'s shell: each policy's run with the planner in the loop
 * (`src/sim/plannerLoop.ts`), in this thread (the planner's searches run between the run's
 * events), then the results table and, per run, the planner's figures: the first answer, the
 * replica-hours, the SLO with its p99s, and the replica count over time.
 */
import { resultsJson, type SimulatedRun } from '../results/result.ts';
import { formatResults } from '../results/table.ts';
import {
  type PlannerLoopOptions,
  type PlannerLoopResult,
  simulatePlannerLoop,
} from '../sim/plannerLoop.ts';
import type { SimConfig } from '../sim/run.ts';

/** Rows of the count table at most; --json has every change. */
const MAX_ROWS = 40;

export function runSimPlanner(
  base: SimConfig,
  policies: readonly string[],
  options: PlannerLoopOptions,
  json: boolean,
): number {
  const runs = policies.map((policy) =>
    simulatePlannerLoop({ ...base, router: { ...base.router, policy } }, options),
  );
  const results = runs.map((r) => r.run);
  if (json) {
    const doc = JSON.parse(resultsJson(results)) as Record<string, unknown>;
    doc.planner = runs.map((r) => ({ policy: r.run.policy, ...r.planner }));
    process.stdout.write(`${JSON.stringify(doc)}\n`);
    return 0;
  }
  process.stdout.write(`${formatResults(results)}\n`);
  for (const r of runs) process.stdout.write(`\n${formatPlannerLoop(r.run, r.planner)}\n`);
  return 0;
}

const int = (x: number) => Math.round(x).toLocaleString('en-US');
const fixed = (x: number, d: number) =>
  x.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d });

/** The planner's figures for one run, as text. */
export function formatPlannerLoop(run: SimulatedRun, p: PlannerLoopResult): string {
  const o = p.options;
  const s = (ms: number) => `${fixed(ms / 1000, 0)} s`;
  const first = p.rounds[0];
  const lines = [
    `planner in the loop (${run.policy}): starts at ${p.initialReplicas} replicas; window ${s(o.windowMs)}${o.fastWindowMs ? ` (and its last ${s(o.fastWindowMs)})` : ''}, every ${s(o.intervalMs)}, scale-down ${s(o.scaleDownMs)}, start-up ${s(o.startupMs)}`,
    first === undefined
      ? 'first answer: none (fewer than 2 requests in every window)'
      : `first answer: ${fixed(first.atMs / 1000, 0)} s into the traffic (${first.desired} replicas)`,
    `replica-hours: ${fixed(p.replicaHours, 3)} over the ${fixed(p.spanS, 0)} s of arrivals (mean ${fixed(p.spanS > 0 ? (p.replicaHours * 3600) / p.spanS : 0, 1)} replicas); ${fixed(p.replicaHoursToEnd, 3)} to the last request's end (${fixed(p.endS, 0)} s)`,
    sloLine(run),
    '',
    countTable(p),
  ];
  return lines.join('\n');
}

/** "SLO: met (TTFT p99 ... ms, target ...; TPOT p99 ...; ITL p99 ...; errors 0)". */
export function sloLine(run: SimulatedRun): string {
  const slo = run.slo;
  const ttft =
    slo?.ttftSlowdown !== undefined
      ? `TTFT p99 ${int(run.ttftMs.p99)} ms, slowdown p99 ${fixed(run.ttftSlowdown?.p99 ?? Number.NaN, 2)} (target ${slo.ttftSlowdown})`
      : `TTFT p99 ${int(run.ttftMs.p99)} ms (target ${slo?.ttftP99Ms ?? '-'})`;
  return [
    `SLO: ${run.sloMet ? 'met' : 'missed'}: ${ttft}`,
    `TPOT p99 ${fixed(run.tpotMs.p99, 1)} ms (target ${slo?.tpotP99Ms ?? '-'})`,
    `ITL p99 ${fixed(run.itlMs.p99, 1)} ms`,
    `errors ${run.errors}`,
  ].join('; ');
}

/** The count over time: a row at each change of size and each round that moved the count. */
function countTable(p: PlannerLoopResult): string {
  const rounds = new Map(p.rounds.map((r) => [r.atMs, r]));
  const times = new Set<number>(p.sizes.map((z) => z.atMs));
  for (const r of p.rounds) if (r.move !== 'hold') times.add(r.atMs);
  const sorted = [...times].sort((a, b) => a - b);
  const fast = (p.options.fastWindowMs ?? 0) > 0;
  const header = ['time s', 'answer', ...(fast ? ['fast'] : []), 'desired'];
  header.push('serving', 'starting', 'draining');
  const none = `>${p.options.maxReplicas}`;
  const rows = sorted.slice(0, MAX_ROWS).map((t) => {
    const round = rounds.get(t);
    let size = p.sizes[0]!;
    for (const z of p.sizes) if (z.atMs <= t) size = z;
    return [
      fixed(t / 1000, 1),
      round === undefined ? '-' : String(round.answer ?? none),
      ...(fast ? [round?.fastAnswer == null ? '-' : String(round.fastAnswer)] : []),
      round === undefined ? '-' : String(round.desired),
      String(size.serving),
      String(size.starting),
      String(size.draining),
    ];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padStart(widths[i]!)).join('  ');
  const out = [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)];
  if (sorted.length > MAX_ROWS) out.push(`... ${sorted.length - MAX_ROWS} more (--json has them)`);
  out.push(
    `answer: the search on the window (>N: none up to --planner-max-replicas met the SLO);${fast ? ' fast: on its last --planner-fast-window-s;' : ''} desired: after hysteresis`,
  );
  return out.join('\n');
}
