/** A line (or dot, or step) chart as inline SVG: the report's CDFs and the live charts over time. */
import { COLORS, DASHES, escapeHtml, fmt, marker, ticks } from './svg.ts';

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
