/** Plain-text rendering of results for the terminal: simulated runs, live runs, searches. */
import { grid, n0, n1, pct } from '../util/textTable.ts';
import type { LiveRun, RunResult, SearchResult, SimulatedRun } from './result.ts';

/** The latency columns sim and bench print alike. */
const LATENCY_HEAD = ['TTFT p50', 'p90', 'p99 ms', 'TPOT p50', 'p99 ms', 'ITL p99'];

function latencyCells(r: Pick<RunResult, 'ttftMs' | 'tpotMs' | 'itlMs'>): string[] {
  return [
    n0(r.ttftMs.p50),
    n0(r.ttftMs.p90),
    n0(r.ttftMs.p99),
    n1(r.tpotMs.p50),
    n1(r.tpotMs.p99),
    n1(r.itlMs.p99),
  ];
}

export function formatResults(results: SimulatedRun[]): string {
  const head = ['policy', 'replicas', ...LATENCY_HEAD, 'hit rate', 'util', 'done', 'errors', 'SLO'];
  const rows = results.map((r) => [
    r.policy,
    String(r.replicas),
    ...latencyCells(r),
    pct(r.hitRate),
    pct(r.utilization.mean),
    String(r.completed),
    String(r.errors),
    r.stoppedEarly ? 'missed*' : r.sloMet ? 'met' : 'missed',
  ]);
  const lines = [grid(head, rows)];
  const watched = results.filter((r) => r.customers.watchedTtftMs !== null);
  if (watched.length > 0) {
    const c = watched[0]!.customers.watched;
    lines.push(
      '',
      grid(
        ['policy', `cust ${c} TTFT p50`, 'p99 ms', 'others p50', 'p99 ms', 'owners max', 'last'],
        watched.map((r) => [
          r.policy,
          n0(r.customers.watchedTtftMs?.p50 ?? Number.NaN),
          n0(r.customers.watchedTtftMs?.p99 ?? Number.NaN),
          n0(r.customers.othersTtftMs?.p50 ?? Number.NaN),
          n0(r.customers.othersTtftMs?.p99 ?? Number.NaN),
          String(Math.max(0, ...r.owners.watched)),
          String(r.owners.watched.at(-1) ?? 0),
        ]),
      ),
    );
  }
  for (const r of results) {
    for (const f of r.faults) {
      if (f.kind === 'revive') {
        lines.push(`${r.policy}: replica ${f.replica} came back cold at ${n1(f.atMs / 1000)} s`);
        continue;
      }
      lines.push(
        `${r.policy}: replica ${f.replica} killed at ${n1(f.atMs / 1000)} s: ${f.rerouted} re-routed, ` +
          `${f.errors} errors mid-stream; the ${f.customers} customers only it held (${f.sharedCustomers} more ` +
          `were held elsewhere too): TTFT p50 ${n0(f.ttftBeforeP50Ms)} ms ` +
          `before, ${n0(f.ttftFirstAfterP50Ms)} ms on their first request after, ${n0(f.ttftLaterP50Ms)} ms later`,
      );
    }
    const failOpens = r.router.failOpens ?? 0;
    if (failOpens > 0) {
      lines.push(
        `${r.policy}: ${failOpens} fail-opens (no replica passed the KV / staleness guards; ` +
          `routed to the least loaded), ${r.router.spills ?? 0} spills`,
      );
    }
    const kinds = Object.entries(r.errorsByKind);
    if (kinds.length > 0) {
      lines.push(`${r.policy}: errors ${kinds.map(([k, v]) => `${k} ${v}`).join(', ')}`);
    }
  }
  if (results.some((r) => r.stoppedEarly)) {
    lines.push('* stopped as soon as the SLO was certainly missed');
  }
  return lines.join('\n');
}

export function formatSearch(search: SearchResult[]): string {
  return grid(
    ['policy', 'min replicas', 'probes (replicas: TTFT p99 ms, met?)'],
    search.map((s) => [
      s.policy,
      s.minReplicas === null ? 'not met' : String(s.minReplicas),
      s.probes.map((p) => `${p.replicas}: ${n0(p.ttftP99Ms)}${p.sloMet ? ' ok' : ' x'}`).join(', '),
    ]),
  );
}

/** A live run's table: what a client can measure, then its send lag and wall time. */
export function formatLiveResults(results: LiveRun[]): string {
  const head = ['policy', 'replicas', ...LATENCY_HEAD, 'E2E p50', 'hit rate', 'done', 'errors'];
  const rows = results.map((r) => [
    r.policy ?? '-',
    r.replicas === null ? '-' : String(r.replicas),
    ...latencyCells(r),
    n0(r.e2eMs.p50),
    pct(r.hitRate),
    String(r.completed),
    String(r.errors),
  ]);
  const lines = [grid(head, rows)];
  for (const r of results) {
    const who = r.policy ?? 'bench';
    const kinds = Object.entries(r.errorsByKind);
    if (kinds.length > 0)
      lines.push(`${who}: errors ${kinds.map(([k, v]) => `${k} ${v}`).join(', ')}`);
    if (r.cancelled > 0) lines.push(`${who}: ${r.cancelled} cancelled in flight (interrupted)`);
    if (r.promptMismatches > 0) {
      lines.push(`${who}: ${r.promptMismatches} prompts counted differently by the server`);
    }
    const hot = r.customers?.watchedTtftMs;
    if (hot) {
      lines.push(
        `${who}: customer ${r.customers!.watched} TTFT p50 ${n0(hot.p50)} p99 ${n0(hot.p99)} ms (${hot.count} requests); others p99 ${n0(r.customers!.othersTtftMs?.p99 ?? Number.NaN)} ms`,
      );
    }
    const scale = r.speedup === 1 ? '' : `; latencies x ${r.speedup} (speedup) to workload ms`;
    lines.push(
      `${who}: ${r.arrived} sent in ${n1(r.wallS)} s wall, send lag p99 ${n1(r.sendLagMs.p99)} ms${scale}`,
    );
  }
  return lines.join('\n');
}
