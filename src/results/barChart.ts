/** A horizontal bar chart as inline SVG: one bar per name, `null` drawn as "not met". */
import { COLORS, escapeHtml } from './svg.ts';

const W = 720;

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
