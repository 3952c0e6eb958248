/**
 * The A/B harness of `bench/*Ab.ts`: this tree against a baseline tree, in rounds that alternate
 * which side goes first, so that a busy machine weighs on both alike. Each side's figure is the
 * median over the rounds; the ratio is the median of the per-round ratios (this tree / baseline),
 * which cancels what a round's load does to both. The baseline is a tree laid out as this one
 * (`baselineSrc.ts`): `git archive <commit> src package.json | tar -x -C /tmp/base`, then
 * `BASELINE_SRC=/tmp/base/src`.
 */
import { loadavg } from 'node:os';
import { resolve } from 'node:path';
import { baselineSrc } from './baselineSrc.ts';

/** One round's figures of one side, by name. */
export type Figures = Record<string, number>;
export type Side = 'baseline' | 'current';
export const SIDES: readonly Side[] = ['baseline', 'current'];

/** The middle value (the mean of the two middle ones of an even count); NaN for none. */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** Both sides' `src/` folders: `BASELINE_SRC` (checked; exits 2 when unset) and this tree's. */
export function abSources(): Record<Side, string> {
  return { baseline: baselineSrc(true), current: resolve(import.meta.dirname, '../src') };
}

/** Each side's modules, loaded from its `src/` by `load`. */
export async function loadSides<T>(load: (src: string) => Promise<T>): Promise<Record<Side, T>> {
  const src = abSources();
  return { baseline: await load(src.baseline), current: await load(src.current) };
}

export interface AbRuns<S extends string = Side> {
  rounds: number;
  /** Per side, one `Figures` a round. */
  runs: Record<S, Figures[]>;
}

/**
 * `rounds` rounds of `measure` on every side; the order of the sides is reversed every other
 * round (`swap`, the default) or kept. `onRound` sees each round's figures (a progress line).
 */
export async function alternateRounds<S extends string>(
  rounds: number,
  sides: readonly S[],
  measure: (side: S, round: number) => Figures | Promise<Figures>,
  options: { swap?: boolean; onRound?: (round: number, got: Record<S, Figures>) => void } = {},
): Promise<AbRuns<S>> {
  const runs = Object.fromEntries(sides.map((s) => [s, [] as Figures[]])) as Record<S, Figures[]>;
  for (let round = 0; round < rounds; round++) {
    const order = options.swap !== false && round % 2 === 1 ? [...sides].reverse() : sides;
    const got = {} as Record<S, Figures>;
    for (const side of order) got[side] = await measure(side, round);
    for (const side of sides) runs[side].push(got[side]);
    options.onRound?.(round, got);
  }
  return { rounds, runs };
}

export interface AbSummary {
  rounds: number;
  /** Per side, each figure's median over the rounds. */
  medians: Record<string, Figures>;
  /** Each figure's median of the per-round ratios current / baseline. */
  ratio: Figures;
}

/** Medians per side and the median per-round ratio (`current` over `baseline`). */
export function summarize<S extends string>(ab: AbRuns<S>, current: S, baseline: S): AbSummary {
  const runs = ab.runs as Record<string, Figures[]>;
  const fields = Object.keys(runs[current]![0] ?? {});
  const medians: Record<string, Figures> = {};
  for (const [side, figures] of Object.entries(runs)) {
    medians[side] = Object.fromEntries(fields.map((f) => [f, median(figures.map((x) => x[f]!))]));
  }
  const base = runs[baseline]!;
  const ratio = Object.fromEntries(
    fields.map((f) => [f, median(runs[current]!.map((x, i) => x[f]! / base[i]![f]!))]),
  );
  return { rounds: ab.rounds, medians, ratio };
}

/** The 1-minute load average at hand, one decimal. */
export const loadAverage = (): number => Math.round(loadavg()[0]! * 10) / 10;

/** `x` rounded to `digits` decimals (for JSON output). */
export const rounded = (x: number, digits: number): number =>
  Math.round(x * 10 ** digits) / 10 ** digits;

/**
 * Prints a summary as a table: each side's medians (4 significant digits), then the ratios
 * (3 decimals), under `title`, and the load averages.
 */
export function printAbTable(title: string, s: AbSummary): void {
  const rows: Record<string, Record<string, string>> = {};
  for (const [side, figures] of Object.entries(s.medians)) {
    rows[side] = Object.fromEntries(Object.entries(figures).map(([f, x]) => [f, x.toPrecision(4)]));
  }
  rows['current / baseline'] = Object.fromEntries(
    Object.entries(s.ratio).map(([f, x]) => [f, x.toFixed(3)]),
  );
  console.log(title);
  console.table(rows);
  console.log(
    `load average ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
  );
}
