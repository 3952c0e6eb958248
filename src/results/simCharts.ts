/**
 * The simulator's charts in the HTML report: the capacity curve (p99s against replicas, from a
 * search's probes, with the SLO line) and per-replica heat maps of queued prompt tokens and KV
 * usage over time. Inline SVG, no scripts; the page is `report.ts`'s.
 */
import type { RunResult, SearchResult } from './result.ts';
import { COLORS, DASHES, escapeHtml, fmt, marker, ticks } from './svg.ts';
import type { SloTargets } from './slo.ts';

const W = 720;
const H = 340;
const PAD = { left: 64, right: 150, top: 34, bottom: 44 };
/** Height of the band above the plot where stopped probes are marked. */
const STOPPED_BAND = 16;

interface CurvePoint {
  replicas: number;
  value: number;
  /** Stopped early: the SLO was certainly missed; the value covers only the requests done. */
  stopped: boolean;
}

/**
 * One p99 against replicas, a line and a marker shape per policy. Probes that stopped early are
 * marked in a band above the plot (they missed; their p99 is not comparable). Points of
 * different policies at the same count are spread a few pixels apart so none hides another.
 */
export function capacityChart(
  title: string,
  search: SearchResult[],
  pick: (p: SearchResult['probes'][number]) => number,
  opts: { yLabel: string; sloValue: number; sloLabel: string; unit: string },
): string {
  const series = search.map((s) => ({
    name: s.policy,
    points: s.probes.map(
      (p): CurvePoint => ({ replicas: p.replicas, value: pick(p), stopped: p.stoppedEarly }),
    ),
  }));
  const done = series.flatMap((s) => s.points.filter((p) => !p.stopped && p.value > 0));
  const counts = series.flatMap((s) => s.points.map((p) => p.replicas));
  if (counts.length === 0) return `<h2>${escapeHtml(title)}</h2><p>no probes</p>`;
  const values = [...done.map((p) => p.value), opts.sloValue].filter((v) => Number.isFinite(v));
  const yMin = Math.min(...values);
  const yMax = Math.max(...values);
  // Log scale once the p99s span more than a factor of 20 (a knee next to a flat tail).
  const logY = yMin > 0 && yMax / yMin > 20;
  const yLo = logY ? 10 ** Math.floor(Math.log10(yMin)) : 0;
  const yHi = logY ? 10 ** Math.ceil(Math.log10(yMax)) : yMax * 1.1;
  const xLo = Math.max(0, Math.min(...counts) - 1);
  const xHi = Math.max(...counts) + 1;
  const iw = W - PAD.left - PAD.right;
  const ih = H - PAD.top - PAD.bottom;
  const spread = Math.min(4, (iw / Math.max(1, xHi - xLo)) * 0.3);
  const sx = (x: number, i: number): number =>
    PAD.left + ((x - xLo) / (xHi - xLo)) * iw + (i - (series.length - 1) / 2) * spread;
  const sy = (y: number): number => {
    const f = logY
      ? (Math.log10(y) - Math.log10(yLo)) / (Math.log10(yHi) - Math.log10(yLo))
      : (y - yLo) / (yHi - yLo);
    return PAD.top + ih - Math.min(1, Math.max(0, f)) * ih;
  };
  const parts: string[] = [];
  for (const t of ticks(xLo, xHi, false).filter((t) => Number.isInteger(t))) {
    const x = sx(t, (series.length - 1) / 2);
    parts.push(
      `<line x1="${x}" x2="${x}" y1="${PAD.top}" y2="${PAD.top + ih}" class="grid"/>`,
      `<text x="${x}" y="${PAD.top + ih + 16}" text-anchor="middle">${fmt(t)}</text>`,
    );
  }
  for (const t of ticks(yLo, yHi, logY)) {
    parts.push(
      `<line x1="${PAD.left}" x2="${PAD.left + iw}" y1="${sy(t)}" y2="${sy(t)}" class="grid"/>`,
      `<text x="${PAD.left - 6}" y="${sy(t) + 4}" text-anchor="end">${fmt(t, 2)}</text>`,
    );
  }
  const sloY = sy(opts.sloValue);
  parts.push(
    `<line x1="${PAD.left}" x2="${PAD.left + iw}" y1="${sloY}" y2="${sloY}" stroke="#d00" stroke-width="1.5" stroke-dasharray="6 4"/>`,
    `<text x="${PAD.left + iw - 4}" y="${sloY - 5}" text-anchor="end" fill="#d00">${escapeHtml(opts.sloLabel)}</text>`,
    `<text x="${PAD.left - 6}" y="${PAD.top - STOPPED_BAND / 2 + 4}" text-anchor="end">stopped</text>`,
  );
  series.forEach((s, i) => {
    parts.push(...seriesMarks(s, i, { sx, sy, iw }, opts.unit));
  });
  parts.push(
    `<text x="${PAD.left + iw / 2}" y="${H - 6}" text-anchor="middle">replicas</text>`,
    `<text x="14" y="${PAD.top + ih / 2}" text-anchor="middle" transform="rotate(-90 14 ${PAD.top + ih / 2})">${escapeHtml(opts.yLabel)}${logY ? ' (log scale)' : ''}</text>`,
    `<rect x="${PAD.left}" y="${PAD.top}" width="${iw}" height="${ih}" fill="none" stroke="#333"/>`,
  );
  return `<h2>${escapeHtml(title)}</h2><svg viewBox="0 0 ${W} ${H}" width="${W}" height="${H}">${parts.join('')}</svg>`;
}

/** One policy's line, markers (stopped probes in the band above) and legend entry. */
function seriesMarks(
  s: { name: string; points: CurvePoint[] },
  i: number,
  plot: { sx: (x: number, i: number) => number; sy: (y: number) => number; iw: number },
  unit: string,
): string[] {
  const { sx, sy, iw } = plot;
  const marks: string[] = [];
  const color = COLORS[i % COLORS.length]!;
  const measured = s.points.filter((p) => !p.stopped && Number.isFinite(p.value) && p.value > 0);
  const line = measured.map((p) => `${sx(p.replicas, i).toFixed(1)},${sy(p.value).toFixed(1)}`);
  if (line.length > 1) {
    marks.push(
      `<polyline fill="none" stroke="${color}" stroke-width="1.6" stroke-dasharray="${DASHES[i % DASHES.length]}" points="${line.join(' ')}"/>`,
    );
  }
  for (const p of measured) {
    const tip = `${s.name}, ${p.replicas} replicas: ${fmt(p.value, 1)} ${unit}`;
    marks.push(marker(i, sx(p.replicas, i), sy(p.value), color, tip));
  }
  for (const p of s.points.filter((q) => q.stopped)) {
    const tip = `${s.name}, ${p.replicas} replicas: stopped early, SLO missed`;
    marks.push(marker(i, sx(p.replicas, i), PAD.top - STOPPED_BAND / 2, color, tip, true));
  }
  const ly = PAD.top + i * 18;
  marks.push(
    marker(i, PAD.left + iw + 18, ly + 6, color, s.name),
    `<text x="${PAD.left + iw + 30}" y="${ly + 10}">${escapeHtml(s.name)}</text>`,
  );
  return marks;
}

/** The capacity curves for a search: TTFT (or its slowdown) p99, then TPOT p99. */
export function capacitySection(search: SearchResult[], slo: SloTargets | undefined): string[] {
  if (search.length === 0 || slo === undefined) return [];
  const slowdown = slo.ttftSlowdown;
  const ttft =
    slowdown !== undefined
      ? capacityChart(
          'Capacity: TTFT slowdown p99 against replicas',
          search,
          (p) => p.ttftSlowdownP99 ?? Number.NaN,
          {
            yLabel: 'TTFT / idle-replica TTFT, p99',
            sloValue: slowdown,
            sloLabel: `SLO ≤ ${slowdown}×`,
            unit: '×',
          },
        )
      : capacityChart('Capacity: TTFT p99 against replicas', search, (p) => p.ttftP99Ms, {
          yLabel: 'TTFT p99 (ms)',
          sloValue: slo.ttftP99Ms ?? Number.NaN,
          sloLabel: `SLO ${fmt(slo.ttftP99Ms ?? Number.NaN)} ms`,
          unit: 'ms',
        });
  const tpot = capacityChart('Capacity: TPOT p99 against replicas', search, (p) => p.tpotP99Ms, {
    yLabel: 'TPOT p99 (ms)',
    sloValue: slo.tpotP99Ms,
    sloLabel: `SLO ${fmt(slo.tpotP99Ms)} ms`,
    unit: 'ms',
  });
  return [
    ttft,
    tpot,
    legend(
      'Each point is one probe of the replica search. Marks in the band above a plot are probes ' +
        'stopped as soon as the SLO was certainly missed; their p99 would cover only the requests ' +
        'done by then. Marks of different policies at one count are drawn a few pixels apart.',
    ),
    searchTable(search),
  ];
}

/** Per search: the answer, counts above it that missed, why nothing met, the probes. */
function searchTable(search: SearchResult[]): string {
  const rows = search.map((s) => {
    const answer =
      s.minReplicas !== null
        ? String(s.minReplicas)
        : s.unmet?.reason === 'too-few-measured'
          ? `too few requests (n=${s.unmet.measured})`
          : s.unmet?.reason === 'out-of-reach'
            ? `out of reach (${s.unmet.outOfReach} of ${s.unmet.measured})`
            : `not met (≤ ${s.unmet?.maxReplicas ?? '?'})`;
    const cells = [
      s.policy,
      answer,
      s.monotone ? '–' : s.misses.join(', '),
      s.probes.map((p) => `${p.replicas}${p.sloMet ? '✓' : '✗'}`).join(' '),
    ];
    return `<tr>${cells.map((c) => `<td>${escapeHtml(c)}</td>`).join('')}</tr>`;
  });
  const head = ['policy', 'fewest replicas', 'missed above it', 'probes'];
  return (
    `<table><tr>${head.map((h) => `<th>${h}</th>`).join('')}</tr>${rows.join('')}</table>` +
    legend(
      '<b>fewest replicas</b>: the fewest that met the SLO; out of reach: more measured requests ' +
        'than a p99 allows miss their TTFT target even alone on a replica caching every earlier ' +
        'prompt (k of n), so no count meets it; too few requests: under 100 measured, a p99 is ' +
        'their maximum. <b>missed above it</b>: counts above the answer that missed the SLO (the ' +
        'search probes upward until two counts in a row meet): more replicas did not help. ' +
        '<b>probes</b>: each count simulated, ✓ met, ✗ missed.',
    )
  );
}

/** A short explanation under a chart or table. */
export function legend(html: string): string {
  return `<p class="legend">${html}</p>`;
}

/**
 * Rows = replicas, columns = time buckets, the colour from `scale` (white = 0, dark = `max`);
 * grey where the replica was down.
 */
export function heatmap(
  title: string,
  rows: number[][],
  bucketMs: number,
  scale: { max: number; sqrt: boolean; label: string; format: (v: number) => string },
): string {
  const cols = Math.max(1, ...rows.map((r) => r.length));
  const left = 40;
  const cellW = Math.max(1, Math.min(8, (W - left - 20) / cols));
  const cellH = Math.max(3, Math.min(12, 240 / Math.max(1, rows.length)));
  const top = 4;
  const plotH = rows.length * cellH;
  const h = top + plotH + 44;
  const frac = (v: number) => {
    const f = Math.min(1, Math.max(0, v / (scale.max || 1)));
    return scale.sqrt ? Math.sqrt(f) : f;
  };
  const cells: string[] = [];
  const labelEvery = Math.ceil(10 / cellH);
  rows.forEach((row, r) => {
    if (r % labelEvery === 0) {
      cells.push(
        `<text x="${left - 4}" y="${top + r * cellH + Math.min(cellH, 10)}" text-anchor="end" font-size="${Math.min(10, Math.max(8, cellH))}">${r}</text>`,
      );
    }
    row.forEach((v, c) => {
      const fill = Number.isFinite(v) ? shade(frac(v)) : '#ccc';
      cells.push(
        `<rect x="${(left + c * cellW).toFixed(1)}" y="${top + r * cellH}" width="${cellW.toFixed(2)}" height="${cellH}" fill="${fill}"/>`,
      );
    });
  });
  const axisY = top + plotH + 14;
  const totalS = (cols * bucketMs) / 1000;
  cells.push(
    `<text x="${left}" y="${axisY}">0 s</text>`,
    `<text x="${left + cols * cellW}" y="${axisY}" text-anchor="end">${fmt(totalS)} s</text>`,
  );
  // Colour bar: 0 .. max.
  const barX = left;
  const barY = axisY + 8;
  const steps = 40;
  for (let i = 0; i < steps; i++) {
    cells.push(
      `<rect x="${barX + i * 4}" y="${barY}" width="4" height="10" fill="${shade(i / (steps - 1))}"/>`,
    );
  }
  const atHalf = scale.sqrt ? scale.max / 4 : scale.max / 2;
  cells.push(
    `<text x="${barX + steps * 4 + 6}" y="${barY + 9}">0 · ${scale.format(atHalf)} (middle) · ${scale.format(scale.max)} ${escapeHtml(scale.label)}; grey: replica down; one column per ${fmt(bucketMs / 1000, 1)} s</text>`,
  );
  return `<h3>${escapeHtml(title)}</h3><svg viewBox="0 0 ${W} ${h}" width="${W}" height="${h}">${cells.join('')}</svg>`;
}

/** White to dark blue through teal: light for little, dark for much, readable in print. */
function shade(f: number): string {
  const stops: [number, number, number][] = [
    [255, 255, 255],
    [199, 233, 180],
    [65, 182, 196],
    [34, 94, 168],
    [8, 29, 88],
  ];
  const x = Math.min(1, Math.max(0, f)) * (stops.length - 1);
  const i = Math.min(stops.length - 2, Math.floor(x));
  const t = x - i;
  const [a, b] = [stops[i]!, stops[i + 1]!];
  const mix = (k: 0 | 1 | 2) => Math.round(a[k] + (b[k] - a[k]) * t);
  return `rgb(${mix(0)},${mix(1)},${mix(2)})`;
}

/**
 * Per run: queued prompt tokens and KV usage per replica over time. One token scale for every
 * run (the largest bucket of any), so policies compare at a glance; square-root shading so a
 * few deep queues do not wash out the rest.
 */
export function loadSection(results: RunResult[], label: (r: RunResult) => string): string[] {
  const runs = results.filter((r) => r.load !== undefined && r.load.kvUsage.length > 0);
  if (runs.length === 0) return [];
  let maxQueued = 1;
  for (const r of runs) {
    for (const row of r.load!.queuedPromptTokens) {
      for (const v of row) if (v > maxQueued) maxQueued = v;
    }
  }
  const tokens = (v: number) => (v >= 10_000 ? `${fmt(v / 1000)}k` : fmt(v));
  const out = [
    '<h2>Per-replica load over time</h2>',
    legend(
      'Rows are replicas (0 at the top), columns time. <b>Queued prompt tokens</b>: uncached ' +
        'prompt tokens routed to the replica whose first token has not come back (the prefill ' +
        'waiting there), the mean of its reports in the column; the same scale for every run. ' +
        '<b>KV usage</b>: the fraction of its KV blocks in use (running requests and cached ' +
        'prefixes the engine has not evicted).',
    ),
  ];
  for (const r of runs) {
    const load = r.load!;
    out.push(
      heatmap(
        `${label(r)} (${r.replicas} replicas): queued prompt tokens`,
        load.queuedPromptTokens,
        load.bucketMs,
        {
          max: maxQueued,
          sqrt: true,
          label: 'tokens',
          format: tokens,
        },
      ),
      heatmap(`${label(r)}: KV usage`, load.kvUsage, load.bucketMs, {
        max: 1,
        sqrt: false,
        label: 'of the KV pool',
        format: (v) => `${fmt(v * 100)} %`,
      }),
    );
  }
  return out;
}
