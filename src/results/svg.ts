/** What the report's inline SVG charts share: colours, dashes, marker shapes, ticks, numbers. */

export const COLORS = [
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

/**
 * A dash pattern per series, cycling at a different length from the colours and the markers,
 * so two lines that run on top of each other still show both.
 */
export const DASHES = ['none', '7 3', '2 3', '10 3 2 3', '4 4', '1 2'];

export function escapeHtml(text: string): string {
  return text
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;');
}

export const fmt = (v: number, digits = 0): string =>
  Number.isFinite(v) ? v.toLocaleString('en-US', { maximumFractionDigits: digits }) : '–';

/** Tick values: 1-2-5 steps for linear axes, powers of ten for log axes. */
export function ticks(lo: number, hi: number, log: boolean): number[] {
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

/**
 * Marker number `i` (circle, square, triangle, diamond, inverted triangle, cross, plus) at
 * (x, y), filled or hollow, with a hover title.
 */
export function marker(
  i: number,
  x: number,
  y: number,
  color: string,
  title: string,
  hollow = false,
): string {
  const r = 4;
  const paint = hollow
    ? `fill="white" stroke="${color}" stroke-width="1.5"`
    : `fill="${color}" stroke="${color}"`;
  const at = (dx: number, dy: number) => `${(x + dx).toFixed(1)},${(y + dy).toFixed(1)}`;
  const tip = `<title>${escapeHtml(title)}</title>`;
  switch (i % 7) {
    case 0:
      return `<circle cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="${r}" ${paint}>${tip}</circle>`;
    case 1:
      return `<rect x="${(x - r).toFixed(1)}" y="${(y - r).toFixed(1)}" width="${2 * r}" height="${2 * r}" ${paint}>${tip}</rect>`;
    case 2:
      return `<polygon points="${at(0, -r - 1)} ${at(r + 1, r)} ${at(-r - 1, r)}" ${paint}>${tip}</polygon>`;
    case 3:
      return `<polygon points="${at(0, -r - 1)} ${at(r + 1, 0)} ${at(0, r + 1)} ${at(-r - 1, 0)}" ${paint}>${tip}</polygon>`;
    case 4:
      return `<polygon points="${at(-r - 1, -r)} ${at(r + 1, -r)} ${at(0, r + 1)}" ${paint}>${tip}</polygon>`;
    case 5:
      return `<path d="M${at(-r, -r)}L${at(r, r)}M${at(-r, r)}L${at(r, -r)}" stroke="${color}" stroke-width="2">${tip}</path>`;
    default:
      return `<path d="M${at(-r - 1, 0)}L${at(r + 1, 0)}M${at(0, -r - 1)}L${at(0, r + 1)}" stroke="${color}" stroke-width="2">${tip}</path>`;
  }
}
