/**
 * The HTML report: one self-contained page (inline CSS and SVG, no scripts) with the summary
 * table, the TTFT CDF per policy, replicas needed per policy, per-replica load over time and
 * the owners of the watched prefix over time.
 */
import type { RunResult, SearchResult } from './result.ts';
import { DEFAULT_SLO, meetsSlo } from './slo.ts';

const COLORS = [
  '#1f77b4',
  '#d62728',
  '#2ca02c',
  '#ff7f0e',
  '#9467bd',
  '#8c564b',
  '#e377c2',
  '#7f7f7f',
  '#bcbd22',
  '#17becf',
];

const W = 720;
const H = 320;
const PAD = { left: 64, right: 150, top: 20, bottom: 44 };

export function escapeHtml(text: string): string {
  return text
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;');
}

const fmt = (v: number, digits = 0): string =>
  Number.isFinite(v) ? v.toLocaleString('en-US', { maximumFractionDigits: digits }) : '–';

export interface Series {
  name: string;
  points: [number, number][];
  /** Draw the points as dots (measurements) instead of a line. */
  dots?: boolean;
}

/** Tick values: 1-2-5 steps for linear axes, powers of ten for log axes. */
function ticks(lo: number, hi: number, log: boolean): number[] {
  if (log) {
    const out: number[] = [];
    for (let e = Math.floor(Math.log10(lo)); 10 ** e <= hi * 1.0001; e++) {
      if (10 ** e >= lo / 1.0001) out.push(10 ** e);
    }
    return out;
  }
  const span = hi - lo || 1;
  const raw = span / 5;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? mag * 10;
  const out: number[] = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(v);
  return out;
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
    const pts: string[] = [];
    let prevY: number | null = null;
    for (const [x, y] of s.points) {
      if (!Number.isFinite(x + y)) continue;
      if (opts.step && prevY !== null) pts.push(`${sx(x).toFixed(1)},${sy(prevY).toFixed(1)}`);
      pts.push(`${sx(x).toFixed(1)},${sy(y).toFixed(1)}`);
      prevY = y;
    }
    const marks = s.dots
      ? pts.map((p) => {
          const [cx, cy] = p.split(',');
          return `<circle cx="${cx}" cy="${cy}" r="3.5" fill="${color}"/>`;
        })
      : [`<polyline fill="none" stroke="${color}" stroke-width="1.8" points="${pts.join(' ')}"/>`];
    parts.push(
      ...marks,
      `<rect x="${PAD.left + iw + 12}" y="${PAD.top + i * 18}" width="12" height="12" fill="${color}"/>`,
      `<text x="${PAD.left + iw + 30}" y="${PAD.top + i * 18 + 10}">${escapeHtml(s.name)}</text>`,
    );
  });
  parts.push(
    `<text x="${PAD.left + iw / 2}" y="${H - 6}" text-anchor="middle">${escapeHtml(opts.xLabel)}</text>`,
    `<text x="14" y="${PAD.top + ih / 2}" text-anchor="middle" transform="rotate(-90 14 ${PAD.top + ih / 2})">${escapeHtml(opts.yLabel)}</text>`,
    `<rect x="${PAD.left}" y="${PAD.top}" width="${iw}" height="${ih}" fill="none" stroke="#333"/>`,
  );
  return `<h2>${escapeHtml(title)}</h2><svg viewBox="0 0 ${W} ${H}" width="${W}" height="${H}">${parts.join('')}</svg>`;
}

export function barChart(title: string, bars: { name: string; value: number | null }[]): string {
  const max = Math.max(1, ...bars.map((b) => b.value ?? 0));
  const rowH = 22;
  const h = bars.length * rowH + 20;
  const labelW = 130;
  const iw = W - labelW - 80;
  const rows = bars.map((b, i) => {
    const y = 10 + i * rowH;
    const w = b.value === null ? 0 : (b.value / max) * iw;
    const label = b.value === null ? 'not met' : String(b.value);
    return (
      `<text x="${labelW - 8}" y="${y + 14}" text-anchor="end">${escapeHtml(b.name)}</text>` +
      `<rect x="${labelW}" y="${y}" width="${w.toFixed(1)}" height="${rowH - 6}" fill="${COLORS[i % COLORS.length]}"/>` +
      `<text x="${labelW + w + 6}" y="${y + 14}">${label}</text>`
    );
  });
  return `<h2>${escapeHtml(title)}</h2><svg viewBox="0 0 ${W} ${h}" width="${W}" height="${h}">${rows.join('')}</svg>`;
}

/** Rows = replicas, columns = time buckets, darker = busier. */
export function heatmap(title: string, rows: number[][], bucketMs: number): string {
  const cols = Math.max(1, ...rows.map((r) => r.length));
  const cellW = Math.max(1, Math.min(8, (W - PAD.left - 20) / cols));
  const cellH = Math.max(3, Math.min(14, 360 / Math.max(1, rows.length)));
  const h = rows.length * cellH + 40;
  const cells: string[] = [];
  rows.forEach((row, r) => {
    cells.push(
      `<text x="${PAD.left - 6}" y="${20 + r * cellH + cellH - 2}" text-anchor="end" font-size="${Math.min(11, cellH)}">${r}</text>`,
    );
    row.forEach((v, c) => {
      const shade = Math.round(255 * (1 - Math.min(1, Math.max(0, v))));
      cells.push(
        `<rect x="${(PAD.left + c * cellW).toFixed(1)}" y="${20 + r * cellH}" width="${cellW.toFixed(2)}" height="${cellH}" fill="rgb(${shade},${shade},255)"/>`,
      );
    });
  });
  const totalS = (cols * bucketMs) / 1000;
  cells.push(
    `<text x="${PAD.left}" y="${h - 6}">0 s</text>`,
    `<text x="${PAD.left + cols * cellW}" y="${h - 6}" text-anchor="end">${fmt(totalS)} s (busy fraction per ${fmt(bucketMs / 1000, 1)} s; white 0, blue 1)</text>`,
  );
  return `<h3>${escapeHtml(title)}</h3><svg viewBox="0 0 ${W} ${h}" width="${W}" height="${h}">${cells.join('')}</svg>`;
}

function summaryTable(results: RunResult[]): string {
  const head = [
    'policy',
    'replicas',
    'TTFT p50',
    'TTFT p99',
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
  sections.push(summaryTable(results));
  sections.push(
    lineChart(
      'TTFT CDF per policy',
      results.map((r) => ({ name: label(r), points: r.ttftCdf })),
      { xLabel: 'TTFT (ms, log scale)', yLabel: 'fraction of requests', logX: true, yMax: 1 },
    ),
  );
  if (search.length > 0) {
    sections.push(
      barChart(
        `Replicas needed to meet the SLO (TTFT p99 ≤ ${fmt(first?.slo?.ttftP99Ms ?? Number.NaN)} ms, TPOT p99 ≤ ${fmt(first?.slo?.tpotP99Ms ?? Number.NaN)} ms)`,
        search.map((s) => ({ name: s.policy, value: s.minReplicas })),
      ),
    );
  }
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
  const heatmaps = results.flatMap((r) =>
    r.load?.perReplica.some((row) => row.length > 0)
      ? [heatmap(`${label(r)} (${r.replicas} replicas)`, r.load.perReplica, r.load.bucketMs)]
      : [],
  );
  if (heatmaps.length > 0) sections.push('<h2>Per-replica load over time</h2>', ...heatmaps);
  return htmlPage(meta, sections);
}

/** One self-contained page: inline style, a title, the command that made it, the sections. */
export function htmlPage(meta: { title: string; command: string }, sections: string[]): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(meta.title)}</title>
<style>
body{font:14px system-ui,sans-serif;margin:24px;max-width:900px;color:#222}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f3f3f3}svg text{font:11px system-ui,sans-serif;fill:#222}
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
