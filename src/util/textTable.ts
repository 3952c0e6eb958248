/** Terminal tables: the first column (or first few) left-aligned, the rest right-aligned, a dashed rule. */

/** Integer with thousands separators; '–' when not finite. */
export const n0 = (v: number): string =>
  Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : '–';

/** One decimal; '–' when not finite. */
export const n1 = (v: number): string => (Number.isFinite(v) ? v.toFixed(1) : '–');

/** A 0..1 fraction as a percentage with one decimal; '–' when missing. */
export const pct = (v: number | null): string =>
  v !== null && Number.isFinite(v) ? `${(v * 100).toFixed(1)}%` : '–';

/** The table's lines; `leftColumns`: how many columns from the first are left-aligned. */
export function grid(head: string[], rows: string[][], leftColumns = 1): string {
  const widths = head.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, c) => (c < leftColumns ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!)))
      .join('  ');
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}
