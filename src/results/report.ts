/**
 * The HTML report: one self-contained page (inline CSS and SVG, no scripts) with a search's
 * capacity curves and answers (`simCharts.ts`), the summary table, a closed loop's throughput and
 * goodput (`closedLoopReport.ts`), the TTFT CDF per policy, the
 * owners of the watched prefix over time and per-replica load over time.
 */
import { closedLoopSection } from './closedLoopReport.ts';
import { liveCharts, liveNotes } from './liveReport.ts';
import type { RunResult, SearchResult } from './result.ts';
import { capacitySection, legend, loadSection } from './simCharts.ts';
import { DEFAULT_SLO, describeTtftSlo, meetsSlo } from './slo.ts';
import { barChart } from './barChart.ts';
import { lineChart } from './lineChart.ts';
import { escapeHtml, fmt } from './svg.ts';

function summaryTable(results: RunResult[]): string {
  const slowdown = results.some((r) => r.ttftSlowdown !== undefined);
  const head = [
    'policy',
    'replicas',
    'TTFT p50',
    'TTFT p99',
    ...(slowdown ? ['TTFT/idle p99'] : []),
    'TPOT p99',
    'hit rate',
    'util',
    'completed',
    'errors',
    'SLO',
  ];
  const rows = results.map((r) =>
    [
      label(r),
      r.replicas === null ? '–' : String(r.replicas),
      fmt(r.ttftMs.p50),
      fmt(r.ttftMs.p99),
      ...(slowdown ? [fmt(r.ttftSlowdown?.p99 ?? Number.NaN, 2)] : []),
      fmt(r.tpotMs.p99, 1),
      percent(r.hitRate, 1),
      percent(r.utilization?.mean ?? null, 0),
      String(r.completed),
      String(r.errors),
      // A live run is judged against the default SLO (the simulator's own verdict otherwise).
      (r.sloMet ?? meetsSlo(r, r.slo ?? DEFAULT_SLO)) ? 'met' : 'missed',
    ]
      .map((c) => `<td>${escapeHtml(c)}</td>`)
      .join(''),
  );
  return `<table><tr>${head.map((h) => `<th>${h}</th>`).join('')}</tr>${rows.map((r) => `<tr>${r}</tr>`).join('')}</table>`;
}

/** A 0..1 fraction as a percentage; '–' when not measured. */
const percent = (v: number | null, digits: number): string =>
  v !== null && Number.isFinite(v) ? `${(v * 100).toFixed(digits)} %` : '–';

/** A live run without --label is 'bench'. */
const label = (r: RunResult): string => r.policy ?? 'bench';

export function renderReport(
  results: RunResult[],
  search: SearchResult[],
  meta: { title: string; command: string },
): string {
  const first = results[0];
  const sections: string[] = [];
  // A search's answer first: p99s against replicas for every policy, the SLO line across.
  sections.push(...capacitySection(search, first?.slo));
  sections.push(...liveNotes(results));
  sections.push(summaryTable(results), summaryLegend(results));
  sections.push(...closedLoopSection(results, label));
  sections.push(
    lineChart(
      'TTFT CDF per policy',
      results.map((r) => ({ name: label(r), points: r.ttftCdf })),
      { xLabel: 'TTFT (ms, log scale)', yLabel: 'fraction of requests', logX: true, yMax: 1 },
    ),
  );
  sections.push(...liveCharts(results));
  const gateways = results.filter((r) => r.gateways !== undefined);
  if (gateways.length > 0) sections.push(...gatewayCharts(gateways));
  // Owners, load and customers come from the simulator; a live run has none of them.
  const ownersSeries = results.flatMap((r) =>
    r.owners !== undefined && r.owners.watched.length > 0
      ? [{ name: label(r), points: ownerPoints(r.owners) }]
      : [],
  );
  const watched = first?.customers?.watched;
  if (ownersSeries.length > 0 && watched !== null) {
    sections.push(
      lineChart(`Owners of customer ${watched}'s prefix over time`, ownersSeries, {
        xLabel: 'simulated time (s)',
        yLabel: 'replicas holding the prefix',
        step: true,
      }),
    );
  }
  sections.push(...loadSection(results, label));
  return htmlPage(meta, sections);
}

/** What each column of the summary table means. */
function summaryLegend(results: RunResult[]): string {
  const slo = results[0]?.slo ?? DEFAULT_SLO;
  return legend(
    '<b>replicas</b>: replicas behind the router. <b>TTFT p50, p99</b>: time to first token, ms, ' +
      'median and 99th percentile over measured requests (arrivals after the warm-up). ' +
      (results.some((r) => r.ttftSlowdown !== undefined)
        ? "<b>TTFT/idle p99</b>: 99th percentile of each request's TTFT over its own TTFT on an " +
          'idle replica (its whole prompt prefilled cold). '
        : '') +
      '<b>TPOT p99</b>: time per output token after the first, ms. <b>hit rate</b>: prompt tokens ' +
      'served from the prefix cache over prompt tokens. <b>util</b>: mean fraction of time a ' +
      'replica was running a step (decodes count, so it reads high while requests are held). ' +
      '<b>completed</b>: requests finished. <b>errors</b>: requests that did not finish (killed ' +
      'mid-stream, no replica, still in flight at the end). <b>SLO</b>: ' +
      `${escapeHtml(describeTtftSlo(slo))} and TPOT p99 ≤ ${fmt(slo.tpotP99Ms)} ms with no errors.`,
  );
}

/** One self-contained page: inline style, a title, the command that made it, the sections. */
export function htmlPage(meta: { title: string; command: string }, sections: string[]): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(meta.title)}</title>
<style>
body{font:14px system-ui,sans-serif;margin:24px;max-width:900px;color:#222}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f3f3f3}svg text{font:11px system-ui,sans-serif;fill:#222}
.legend{font-size:12px;color:#555;max-width:720px}
.grid{stroke:#e4e4e4}code{background:#f3f3f3;padding:1px 4px}
</style></head><body>
<h1>${escapeHtml(meta.title)}</h1>
<p><code>${escapeHtml(meta.command)}</code></p>
${sections.join('\n')}
</body></html>
`;
}

function ownerPoints(owners: NonNullable<RunResult['owners']>): [number, number][] {
  return owners.watched.map((v, i): [number, number] => [(i * owners.sampleMs) / 1000, v]);
}

/**
 * `kvroute sim --routers`: TTFT p99 and hit rate of each router setup (one router, several
 * sharing state some ms late, several sharing nothing), side by side.
 */
function gatewayCharts(results: RunResult[]): string[] {
  return [
    barChart(
      'TTFT p99 (ms) by router setup',
      results.map((r) => ({ name: setupName(r), value: Math.round(r.ttftMs.p99) })),
    ),
    barChart(
      'Prefix-cache hit rate (%) by router setup',
      results.map((r) => ({
        name: setupName(r),
        value: r.hitRate === null ? null : Math.round(r.hitRate * 1000) / 10,
      })),
    ),
  ];
}

function setupName(r: RunResult): string {
  const g = r.gateways!;
  if (g.routers === 1) return `${r.policy ?? ''} 1 router`;
  return `${g.routers} routers, ${g.syncMs === null ? 'no sync' : `${g.syncMs} ms`}`;
}
