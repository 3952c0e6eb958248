/**
 * The HTML report: one self-contained page (inline CSS and SVG, no scripts) with a search's
 * capacity curves and answers (`simCharts.ts`), the summary table, the TTFT CDF per policy, the
 * owners of the watched prefix over time and per-replica load over time.
 */
import type { RunResult, SearchResult } from './result.ts';
import { capacitySection, legend, loadSection } from './simCharts.ts';
import { DEFAULT_SLO, describeTtftSlo, meetsSlo } from './slo.ts';
import { COLORS, DASHES, escapeHtml, fmt, marker, ticks } from './svg.ts';

export { escapeHtml };

const W = 720;
const H = 320;
const PAD = { left: 64, right: 150, top: 20, bottom: 44 };

export interface Series {
  name: string;
  points: [number, number][];
  /** Draw the points as dots (measurements) instead of a line. */
  dots?: boolean;
}

export function lineChart(
  title: string,
  series: Series[],
  opts: { xLabel: string; yLabel: string; logX?: boolean; yMax?: number; step?: boolean },
): string {
  const all = series.flatMap((s) => s.points).filter(([x, y]) => Number.isFinite(x + y));
  if (all.length === 0) return `<h2>${escapeHtml(title)}</h2><p>no data</p>`;
  const logX = opts.logX ?? false;
  let xLo = Math.min(...all.map(([x]) => (logX ? Math.max(x, 1e-3) : x)));
  let xHi = Math.max(...all.map(([x]) => x));
  if (logX) {
    xLo = 10 ** Math.floor(Math.log10(xLo));
    xHi = 10 ** Math.ceil(Math.log10(xHi));
  }
  if (xHi === xLo) xHi = xLo + 1;
  const yLo = 0;
  const yHi = opts.yMax ?? Math.max(1, ...all.map(([, y]) => y)) * 1.05;
  const iw = W - PAD.left - PAD.right;
  const ih = H - PAD.top - PAD.bottom;
  const sx = (x: number): number =>
    PAD.left +
    (logX
      ? ((Math.log10(Math.max(x, xLo)) - Math.log10(xLo)) / (Math.log10(xHi) - Math.log10(xLo))) *
        iw
      : ((x - xLo) / (xHi - xLo)) * iw);
  const sy = (y: number): number => PAD.top + ih - ((y - yLo) / (yHi - yLo)) * ih;
  const parts: string[] = [];
  for (const t of ticks(xLo, xHi, logX)) {
    parts.push(
      `<line x1="${sx(t)}" x2="${sx(t)}" y1="${PAD.top}" y2="${PAD.top + ih}" class="grid"/>`,
      `<text x="${sx(t)}" y="${PAD.top + ih + 16}" text-anchor="middle">${fmt(t, 2)}</text>`,
    );
  }
  for (const t of ticks(yLo, yHi, false)) {
    parts.push(
      `<line x1="${PAD.left}" x2="${PAD.left + iw}" y1="${sy(t)}" y2="${sy(t)}" class="grid"/>`,
      `<text x="${PAD.left - 6}" y="${sy(t) + 4}" text-anchor="end">${fmt(t, 2)}</text>`,
    );
  }
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]!;
    const pts: [number, number][] = [];
    let prevY: number | null = null;
    for (const [x, y] of s.points) {
      if (!Number.isFinite(x + y)) continue;
      if (opts.step && prevY !== null) pts.push([sx(x), sy(prevY)]);
      pts.push([sx(x), sy(y)]);
      prevY = y;
    }
    const xy = ([x, y]: [number, number]) => `${x.toFixed(1)},${y.toFixed(1)}`;
    if (s.dots) {
      for (const p of pts) parts.push(marker(i, p[0], p[1], color, s.name));
    } else {
      // A dash pattern per series and a few markers along it, at places that differ per series,
      // so lines lying on top of each other stay apart.
      parts.push(
        `<polyline fill="none" stroke="${color}" stroke-width="1.8" stroke-opacity="0.85" stroke-dasharray="${DASHES[i % DASHES.length]}" points="${pts.map(xy).join(' ')}"/>`,
      );
      const every = Math.max(1, Math.floor(pts.length / 5));
      const offset = Math.floor((every * (i % 5)) / 5);
      for (let k = offset; k < pts.length; k += every) {
        parts.push(marker(i, pts[k]![0], pts[k]![1], color, s.name));
      }
    }
    const ly = PAD.top + i * 18;
    parts.push(
      `<line x1="${PAD.left + iw + 8}" x2="${PAD.left + iw + 28}" y1="${ly + 6}" y2="${ly + 6}" stroke="${color}" stroke-width="1.8" stroke-dasharray="${s.dots ? 'none' : DASHES[i % DASHES.length]}"/>`,
      marker(i, PAD.left + iw + 18, ly + 6, color, s.name),
      `<text x="${PAD.left + iw + 34}" y="${ly + 10}">${escapeHtml(s.name)}</text>`,
    );
  });
  parts.push(
    `<text x="${PAD.left + iw / 2}" y="${H - 6}" text-anchor="middle">${escapeHtml(opts.xLabel)}</text>`,
    `<text x="14" y="${PAD.top + ih / 2}" text-anchor="middle" transform="rotate(-90 14 ${PAD.top + ih / 2})">${escapeHtml(opts.yLabel)}</text>`,
    `<rect x="${PAD.left}" y="${PAD.top}" width="${iw}" height="${ih}" fill="none" stroke="#333"/>`,
  );
  return `<h2>${escapeHtml(title)}</h2><svg viewBox="0 0 ${W} ${H}" width="${W}" height="${H}">${parts.join('')}</svg>`;
}

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
  sections.push(summaryTable(results), summaryLegend(results));
  sections.push(
    lineChart(
      'TTFT CDF per policy',
      results.map((r) => ({ name: label(r), points: r.ttftCdf })),
      { xLabel: 'TTFT (ms, log scale)', yLabel: 'fraction of requests', logX: true, yMax: 1 },
    ),
  );
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
