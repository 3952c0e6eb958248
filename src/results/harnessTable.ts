/**
 * The terminal tables of `kvroute sim --rate-ladder` (each stage's figures) and `--metrics-as`
 * (the run by a benchmark harness's definitions, harnessMetrics.ts).
 */
import type { RunResult } from './result.ts';

const fixed = (x: number, digits: number): string =>
  Number.isFinite(x)
    ? x.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : '-';

function table(header: string[], rows: string[][]): string[] {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)];
}

/** One row per run and stage: the stage's rate and window, its requests and figures. */
export function formatStages(results: readonly RunResult[]): string {
  const rows: string[][] = [];
  for (const r of results) {
    for (const s of r.stages ?? []) {
      rows.push([
        r.policy ?? '',
        String(s.stage),
        fixed(s.ratePerS, 2),
        `${fixed(s.startMs / 1000, 0)}-${fixed(s.endMs / 1000, 0)}`,
        fixed(s.achievedRatePerS, 2),
        String(s.sent),
        String(s.completed),
        String(s.timedOut),
        String(s.failed),
        fixed(s.outputTokensPerS, 0),
        fixed(s.ttftMs.p50, 0),
        fixed(s.ttftMs.p99, 0),
        fixed(s.tpotMs.p50, 1),
      ]);
    }
  }
  const header = [
    'policy',
    'stage',
    'rate',
    'window s',
    'sched/s',
    'requests',
    'done',
    'timeout',
    'failed',
    'output tok/s',
    'TTFT p50',
    'TTFT p99',
    'TPOT p50',
  ];
  return [
    ...table(header, rows),
    'stages: requests by the time the workload scheduled them (a capped client sends some later); output tok/s over the first send to the last end of the stage (inference-perf)',
  ].join('\n');
}

/** One row per run: the figures as the chosen harness reports them. */
export function formatHarness(results: readonly RunResult[]): string {
  const runs = results.filter((r) => r.harness !== undefined);
  const harness = runs[0]!.harness!.harness;
  const extra = harness === 'inference-perf' ? 'NTPOT p50' : harness === 'sglang' ? 'conc.' : null;
  const rows = runs.map((r) => {
    const h = r.harness!;
    const row = [
      r.policy ?? '',
      fixed((h.toMs - h.fromMs) / 1000, 1),
      String(h.completed),
      String(h.failed),
      fixed(h.requestsPerS, 2),
      fixed(h.outputTokensPerS, 0),
      fixed(h.totalTokensPerS, 0),
      fixed(h.ttftMs.mean, 0),
      fixed(h.ttftMs.p50, 0),
      fixed(h.ttftMs.p99, 0),
      fixed(h.tpotMs.mean, 1),
      fixed(h.tpotMs.p99, 1),
    ];
    if (extra === 'NTPOT p50') row.push(fixed(h.normalizedTpotMs!.p50, 1));
    if (extra === 'conc.') row.push(fixed(h.meanConcurrency!, 1));
    return row;
  });
  const header = [
    'policy',
    'duration s',
    'ok',
    'failed',
    'req/s',
    'output tok/s',
    'total tok/s',
    'TTFT mean',
    'TTFT p50',
    'TTFT p99',
    'TPOT mean',
    'TPOT p99',
    ...(extra === null ? [] : [extra]),
  ];
  const interval =
    harness === 'inference-perf'
      ? "from the first request's send to the last end"
      : "from the benchmark's start (the warm-up's end) to the last end";
  return [
    `as ${harness} reports it: successful requests' tokens over the time ${interval}, failed requests included in that time`,
    ...table(header, rows),
  ].join('\n');
}
