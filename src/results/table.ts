/** Plain-text rendering of results for the terminal: simulated runs, live runs, searches. */
import { grid, n0, n1, pct } from '../util/textTable.ts';
import type { LiveRun, RunResult, SearchResult, SimulatedRun } from './result.ts';
import { DEFAULT_SLO, describeTtftSlo, type SloTargets } from './slo.ts';

/** The latency columns sim and bench print alike. */
const LATENCY_HEAD = ['TTFT p50', 'p90', 'p99 ms', 'TPOT p50', 'p99 ms', 'ITL p99'];

/** What the latency columns mean, for the legend under a table. */
const LATENCY_LEGEND =
  'TTFT: time to first token, ms; TPOT: per output token after the first; ITL: between tokens';

/** Where the targets came from: the defaults, or flags. */
function sloSource(slo: SloTargets): string {
  return slo.ttftP99Ms === DEFAULT_SLO.ttftP99Ms &&
    slo.ttftSlowdown === undefined &&
    slo.tpotP99Ms === DEFAULT_SLO.tpotP99Ms
    ? "kvroute sim's default, the router seed's; --slo-ttft-p99-ms, --slo-tpot-p99-ms change it"
    : 'from --slo-ttft-p99-ms or --slo-ttft-slowdown, --slo-tpot-p99-ms';
}

/** The SLO a run was judged against, in words. */
export function sloText(slo: SloTargets): string {
  const ms = (v: number) => (Number.isInteger(v) ? n0(v) : n1(v));
  return `${describeTtftSlo(slo)}, TPOT p99 ≤ ${ms(slo.tpotP99Ms)} ms, no errors`;
}

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
  const slo = results[0]?.slo;
  lines.push(
    `${LATENCY_LEGEND}; hit rate: prompt tokens from cache; util: mean busy share of the ` +
      `replicas; done, errors: requests${slo ? `; SLO: met when ${sloText(slo)}` : ''}`,
  );
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
      `cust ${c}: the watched customer's requests (the hot one, else customer 0); others: every ` +
        "other customer's; owners max, last: most replicas holding its prefix at once, and at the end",
    );
  }
  for (const r of results) {
    if (r.ttftSlowdown !== undefined && r.slo.ttftSlowdown !== undefined) {
      lines.push(
        `${r.policy}: TTFT / idle-replica TTFT p50 ${n1(r.ttftSlowdown.p50)}, p99 ${n1(r.ttftSlowdown.p99)} ` +
          `(SLO: p99 at most ${r.slo.ttftSlowdown})`,
      );
    }
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
  const table = grid(
    ['policy', 'min replicas', 'probes (replicas: TTFT p99 ms, met?)'],
    search.map((s) => [
      s.policy,
      searchVerdict(s),
      s.probes
        .map((p) => {
          const ttft =
            p.ttftSlowdownP99 === undefined ? n0(p.ttftP99Ms) : `x${n1(p.ttftSlowdownP99)}`;
          return `${p.replicas}: ${ttft}${p.sloMet ? ' ok' : p.stoppedEarly ? ' x*' : ' x'}`;
        })
        .join(', '),
    ]),
  );
  // One line per distinct note, naming every policy it applies to.
  const byNote = new Map<string, string[]>();
  for (const s of search) {
    const note =
      s.unmet !== null
        ? unmetAdvice(s.unmet)
        : s.monotone
          ? null
          : `met at ${s.minReplicas} but missed at ${s.misses.join(', ')}: more replicas did ` +
            'not help (not monotone); plan with a count past the last miss';
    if (note !== null) byNote.set(note, [...(byNote.get(note) ?? []), s.policy]);
  }
  const notes = [...byNote].map(([note, policies]) => `${policies.join(', ')}: ${note}`);
  if (search.some((s) => s.probes.some((p) => p.ttftSlowdownP99 !== undefined))) {
    notes.push("xN: TTFT p99 as a multiple of the request's own idle-replica TTFT");
  }
  if (search.some((s) => s.probes.some((p) => p.stoppedEarly))) {
    notes.push(
      'x*: stopped as soon as the SLO was certainly missed (p99 of the requests done by then)',
    );
  }
  const legend =
    'min replicas: the fewest meeting the SLO (a note below says why when none); probes: each replica count simulated, its TTFT ' +
    'p99 in ms, ok (met) or x (missed)';
  return [table, legend, ...notes].join('\n');
}

/** The fewest replicas, with the counts above it that missed; or why there is none. */
function searchVerdict(s: SearchResult): string {
  if (s.minReplicas !== null) {
    return s.monotone
      ? String(s.minReplicas)
      : `${s.minReplicas} (misses at ${s.misses.join(', ')})`;
  }
  switch (s.unmet?.reason) {
    case 'too-few-measured':
      return 'too few requests';
    case 'out-of-reach':
      return 'out of reach';
    default:
      return `not met (≤ ${s.unmet?.maxReplicas ?? '?'})`;
  }
}

function unmetAdvice(u: NonNullable<SearchResult['unmet']>): string {
  switch (u.reason) {
    case 'too-few-measured':
      return (
        `too few measured requests (n=${u.measured}) for a p99 (at least 100); ` +
        'raise --duration or lower --warmup'
      );
    case 'out-of-reach':
      return (
        `${u.outOfReach} of ${u.measured} measured requests cannot meet the TTFT target even ` +
        'alone on a replica caching every earlier prompt (their own prefill is longer; a p99 ' +
        `allows ${u.measured - Math.ceil(0.99 * u.measured)}), so no replica count meets it. A ` +
        'longer --duration dilutes cold starts; --slo-ttft-slowdown sets a target that scales ' +
        'with each prompt'
      );
    default:
      return `not met up to ${u.maxReplicas} replicas (--max-replicas)`;
  }
}

/** A live run's table: what a client can measure, then its send lag and wall time. */
export function formatLiveResults(results: LiveRun[]): string {
  const head = [
    'policy',
    'replicas',
    ...LATENCY_HEAD,
    'E2E p50',
    'hit rate',
    'done',
    'errors',
    'SLO',
  ];
  const rows = results.map((r) => [
    r.policy ?? '-',
    r.replicas === null ? '-' : String(r.replicas),
    ...latencyCells(r),
    n0(r.e2eMs.p50),
    pct(r.hitRate),
    String(r.completed),
    String(r.errors),
    r.sloMet ? 'met' : 'missed',
  ]);
  const slo = results[0]?.slo ?? DEFAULT_SLO;
  const lines = [
    grid(head, rows),
    `${LATENCY_LEGEND}; E2E: arrival to last token; hit rate: cached prompt tokens as the ` +
      `server reports them; done, errors: requests; SLO: met when ${sloText(slo)} (${sloSource(slo)})`,
  ];
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
