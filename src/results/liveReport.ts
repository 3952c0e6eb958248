/**
 * The live runs' part of the HTML report (`kvroute bench --report`): the SLO they were judged
 * by, a warning when the fleet was warm before the run, and charts over the run's time (TTFT,
 * TPOT, hit rate, requests and errors per second, by arrival time). Simulated runs have none
 * of these fields, so they get none of these sections.
 */
import { lineChart, type Series } from './lineChart.ts';
import { escapeHtml } from './svg.ts';
import type { RunResult } from './result.ts';
import { DEFAULT_SLO } from './slo.ts';
import type { Timeline } from './timeline.ts';

const label = (r: RunResult): string => r.policy ?? 'bench';

/** Above the summary: the SLO used, and the warm-start warning. */
export function liveNotes(results: readonly RunResult[]): string[] {
  const live = results.filter((r) => r.timeline !== undefined);
  if (live.length === 0) return [];
  const out: string[] = [];
  const slo = live[0]!.slo ?? DEFAULT_SLO;
  const isDefault =
    slo.ttftP99Ms === DEFAULT_SLO.ttftP99Ms && slo.tpotP99Ms === DEFAULT_SLO.tpotP99Ms;
  out.push(
    `<p>SLO: TTFT p99 ≤ ${slo.ttftP99Ms} ms, TPOT p99 ≤ ${slo.tpotP99Ms} ms, no errors ` +
      (isDefault
        ? "(kvroute sim's default, the router seed's: a cold 8,000-token prefill; " +
          '<code>--slo-ttft-p99-ms</code> and <code>--slo-tpot-p99-ms</code> change it).</p>'
        : '(from <code>--slo-ttft-p99-ms</code>, <code>--slo-tpot-p99-ms</code>).</p>'),
  );
  for (const r of live) {
    const c = r.coldStart;
    if (!c?.warm) continue;
    out.push(
      `<p style="background:#fff3cd;padding:6px 10px"><strong>Warning (${escapeHtml(label(r))}):</strong> ${c.cached} of the ` +
        `first ${c.requests} requests of new customers found their prompt cached. On a fresh ` +
        'fleet they find nothing: the fleet was warm before this run (an earlier run with the ' +
        'same seed sends the same prompts), so hit rate and TTFT read better than from a cold ' +
        'start.</p>',
    );
  }
  return out;
}

/** Below the TTFT CDF: the runs over time. */
export function liveCharts(results: readonly RunResult[]): string[] {
  const live = results.flatMap((r) => (r.timeline ? [{ name: label(r), t: r.timeline }] : []));
  if (live.length === 0) return [];
  const xLabel = 'arrival time (s)';
  const series = (pick: (t: Timeline) => number[], suffix = '', scale = 1): Series[] =>
    live.map(({ name, t }) => ({
      name: `${name}${suffix}`,
      points: pick(t).map((v, i): [number, number] => [(i * t.bucketMs) / 1000, v * scale]),
    }));
  const perS = (t: Timeline, counts: number[]) => counts.map((n) => n / (t.bucketMs / 1000));
  return [
    lineChart(
      'TTFT over time (p50 and p99 of the requests arriving in each interval)',
      [...series((t) => t.ttftP50Ms, ' p50'), ...series((t) => t.ttftP99Ms, ' p99')],
      { xLabel, yLabel: 'TTFT (ms)' },
    ),
    lineChart(
      'TPOT over time',
      [...series((t) => t.tpotP50Ms, ' p50'), ...series((t) => t.tpotP99Ms, ' p99')],
      { xLabel, yLabel: 'TPOT (ms)' },
    ),
    lineChart(
      'Prefix-cache hit rate over time (cached / prompt tokens, as the server reports them)',
      series((t) => t.hitRate, '', 100),
      { xLabel, yLabel: 'hit rate (%)', yMax: 100 },
    ),
    lineChart(
      'Requests and errors per second (by arrival time)',
      [
        ...series((t) => perS(t, t.arrivals), ' sent'),
        ...series((t) => perS(t, t.errors), ' errors'),
      ],
      { xLabel, yLabel: 'requests / s' },
    ),
  ];
}
