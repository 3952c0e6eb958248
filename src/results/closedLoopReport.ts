/**
 * The closed loop's part of the HTML report (`kvroute sim --concurrency C`): a table of each
 * run's concurrency, requests/s, output tokens/s and goodput, and bar charts of output tokens/s
 * and goodput per policy. Nothing when no run was closed-loop.
 */
import { barChart } from './barChart.ts';
import type { RunResult } from './result.ts';
import { legend } from './simCharts.ts';
import { DEFAULT_SLO, describeTtftSlo } from './slo.ts';
import { escapeHtml, fmt } from './svg.ts';

const fixed = (x: number, digits: number): string =>
  x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

export function closedLoopSection(results: readonly RunResult[], label: (r: RunResult) => string) {
  const runs = results.filter((r) => r.closedLoop !== undefined);
  if (runs.length === 0) return [];
  const head = ['policy', 'concurrency', 'req/s', 'output tok/s', 'goodput req/s', 'goodput'];
  const rows = runs.map((r) => {
    const c = r.closedLoop!;
    return [
      label(r),
      String(c.concurrency),
      fixed(c.requestsPerS, 2),
      fixed(c.outputTokensPerS, 0),
      fixed(c.goodputRps, 2),
      c.requestsPerS > 0 ? `${fixed((c.goodputRps / c.requestsPerS) * 100, 1)} %` : '–',
    ]
      .map((cell) => `<td>${escapeHtml(cell)}</td>`)
      .join('');
  });
  const slo = runs[0]!.slo ?? DEFAULT_SLO;
  return [
    `<h2>Closed loop</h2><table><tr>${head.map((h) => `<th>${h}</th>`).join('')}</tr>${rows.map((r) => `<tr>${r}</tr>`).join('')}</table>`,
    legend(
      '<b>concurrency</b>: requests kept in flight (a new one starts as one ends). Over requests ' +
        'ending between the warm-up and the duration: <b>req/s</b> ended, <b>output tok/s</b> ' +
        'their output tokens, <b>goodput req/s</b> those whose own TTFT and TPOT are within ' +
        `the SLO's targets (${escapeHtml(describeTtftSlo(slo))}, TPOT p99 ≤ ${fmt(slo.tpotP99Ms)} ms), ` +
        '<b>goodput</b> their share of req/s.',
    ),
    barChart(
      'Output tokens/s per policy (closed loop)',
      runs.map((r) => ({ name: label(r), value: Math.round(r.closedLoop!.outputTokensPerS) })),
    ),
    barChart(
      'Goodput (requests/s meeting the SLO) per policy (closed loop)',
      runs.map((r) => ({
        name: label(r),
        value: Math.round(r.closedLoop!.goodputRps * 100) / 100,
      })),
    ),
  ];
}
