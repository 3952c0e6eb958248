/**
 * A published run measured by a benchmark harness under load (a rate ladder, a capped client):
 * the figures its authors printed per routing policy (throughput, TTFT, TPOT as their harness
 * defines them: `--metrics-as vllm|inference-perf|sglang`, src/results/harnessMetrics.ts),
 * replayed policy by policy and set beside the simulated ones, with each policy's gain over the
 * first (cache-blind) run, published and simulated.
 *
 * Pure: the runs' setups come from a parser given by the caller (the CLI's flag parser), and
 * the simulation is the same `simulate` as `kvroute sim`.
 */
import type { HarnessSummary, StageSummary } from '../../results/harnessMetrics.ts';
import type { SimConfig } from '../run.ts';
import { simulate } from '../run.ts';
import { grid } from '../../util/textTable.ts';
import { replayHeading, replayJsonLine, signedPct } from './replayText.ts';

/** A run's stages (a rate ladder's; absent without one). */
type Stages = readonly StageSummary[] | undefined;

/**
 * The mean of the stages' output tok/s after the first: llm-d's benchmarking reports print each
 * rate's inference-perf figures and, as "Summary across QPS", their mean (8,730.0 and 4,428.7 in
 * `benchmarking/73-capacity/README.md` are the means of its 16 per-QPS rows, 2,991.5 and 5,380.9
 * in `37-capacity` of its 9), with no row for the warm-up stage the profile starts with.
 */
function stageMeanOutputTokensPerS(stages: Stages): number {
  const after = stages?.slice(1) ?? [];
  if (after.length === 0) return Number.NaN;
  return after.reduce((sum, s) => sum + s.outputTokensPerS, 0) / after.length;
}

/** A figure of the harness summary alone; `better`: which way is a gain. */
const summaryFigure = (
  label: string,
  better: 'higher' | 'lower',
  of: (h: HarnessSummary) => number,
) => ({ label, better, of: (h: HarnessSummary, _s: Stages) => of(h) });

/** What a harness prints that the replay compares; `better`: which way is a gain. */
export const HARNESS_FIGURES = {
  outputTokensPerS: summaryFigure('output tok/s', 'higher', (h) => h.outputTokensPerS),
  stageMeanOutputTokensPerS: {
    label: 'output tok/s, stage mean',
    better: 'higher',
    of: (_h: HarnessSummary, s: Stages) => stageMeanOutputTokensPerS(s),
  },
  totalTokensPerS: summaryFigure('total tok/s', 'higher', (h) => h.totalTokensPerS),
  requestsPerS: summaryFigure('req/s', 'higher', (h) => h.requestsPerS),
  durationS: summaryFigure('duration s', 'lower', (h) => (h.toMs - h.fromMs) / 1000),
  ttftMeanMs: summaryFigure('TTFT mean ms', 'lower', (h) => h.ttftMs.mean),
  ttftP50Ms: summaryFigure('TTFT p50 ms', 'lower', (h) => h.ttftMs.p50),
  ttftP90Ms: summaryFigure('TTFT p90 ms', 'lower', (h) => h.ttftMs.p90),
  ttftP99Ms: summaryFigure('TTFT p99 ms', 'lower', (h) => h.ttftMs.p99),
  tpotMeanMs: summaryFigure('TPOT mean ms', 'lower', (h) => h.tpotMs.mean),
  tpotP50Ms: summaryFigure('TPOT p50 ms', 'lower', (h) => h.tpotMs.p50),
  tpotP99Ms: summaryFigure('TPOT p99 ms', 'lower', (h) => h.tpotMs.p99),
} as const;
export type HarnessFigure = keyof typeof HARNESS_FIGURES;

export interface HarnessPolicyRun {
  /** The policy as the publication names it. */
  label: string;
  /** The kvroute policy that stands for it. */
  policy: string;
  /** Flags this policy's run adds to the setup's (e.g. `--index approx`). */
  args?: readonly string[];
  /** The published figures of this run, in the units of `HarnessFigure`'s name. */
  published: Partial<Record<HarnessFigure, number>>;
}

export interface PublishedHarnessRun {
  name: string;
  title: string;
  /** The publication's address (and the benchmark's configuration, where apart). */
  source: string;
  /** The setup in words, as published. */
  setup: string;
  /** The setup as `kvroute sim` flags, with `--metrics-as` the publication's harness. */
  simArgs: readonly string[];
  /** The cache-blind baseline first; each later run's gain is over it. */
  runs: readonly HarnessPolicyRun[];
  /** What the replay cannot reproduce, or assumes. */
  notes: readonly string[];
}

export interface HarnessFigureRow {
  figure: HarnessFigure;
  published: number;
  simulated: number;
}

export interface HarnessReplayRow {
  label: string;
  policy: string;
  figures: HarnessFigureRow[];
  /** Every published figure's simulated value, and those the publication left out. */
  simulated: Record<HarnessFigure, number>;
  /** Prompt tokens from cache, simulated (0..1). */
  hitRate: number;
  /** Successful and other requests, simulated. */
  completed: number;
  failed: number;
}

export interface HarnessGain {
  label: string;
  figure: HarnessFigure;
  /** Over the first run: higher-is-better figures run / first, lower-is-better first / run. */
  published: number;
  simulated: number;
}

export interface HarnessReplayResult {
  run: PublishedHarnessRun;
  rows: HarnessReplayRow[];
  gains: HarnessGain[];
}

/** The setup as `kvroute sim` would take it from these flags. */
export type SetupOf = (args: readonly string[]) => SimConfig;

/** `args` with `flag`'s value replaced (or the flag added): for a scaled-down setup. */
export function withFlag(args: readonly string[], flag: string, value: string): string[] {
  const at = args.indexOf(flag);
  if (at === -1) return [...args, flag, value];
  return args.map((a, i) => (i === at + 1 ? value : a));
}

/** Simulates each of the run's policies, its setup from `simArgs` (scaled by the caller). */
export function replayHarness(
  run: PublishedHarnessRun,
  setupOf: SetupOf,
  simArgs: readonly string[] = run.simArgs,
): HarnessReplayResult {
  const rows = run.runs.map((p): HarnessReplayRow => {
    const base = setupOf([...simArgs, ...(p.args ?? [])]);
    const result = simulate({ ...base, router: { ...base.router, policy: p.policy } });
    const h = result.harness;
    if (h === undefined) throw new Error(`${run.name}: its setup needs --metrics-as`);
    const simulated = Object.fromEntries(
      (Object.keys(HARNESS_FIGURES) as HarnessFigure[]).map((f) => [
        f,
        HARNESS_FIGURES[f].of(h, result.stages),
      ]),
    ) as Record<HarnessFigure, number>;
    const figures = (Object.keys(p.published) as HarnessFigure[]).map((figure) => ({
      figure,
      published: p.published[figure]!,
      simulated: simulated[figure],
    }));
    return {
      label: p.label,
      policy: p.policy,
      figures,
      simulated,
      hitRate: result.hitRate,
      completed: h.completed,
      failed: h.failed,
    };
  });
  return { run, rows, gains: gainsOver(run, rows) };
}

function gainsOver(run: PublishedHarnessRun, rows: HarnessReplayRow[]): HarnessGain[] {
  const first = run.runs[0]!;
  const gains: HarnessGain[] = [];
  run.runs.forEach((p, i) => {
    if (i === 0) return;
    for (const figure of Object.keys(p.published) as HarnessFigure[]) {
      const base = first.published[figure];
      if (base === undefined) continue;
      const gain = (blind: number, aware: number) =>
        HARNESS_FIGURES[figure].better === 'higher' ? aware / blind : blind / aware;
      gains.push({
        label: p.label,
        figure,
        published: gain(base, p.published[figure]!),
        simulated: gain(rows[0]!.simulated[figure], rows[i]!.simulated[figure]),
      });
    }
  });
  return gains;
}

const num = (x: number) =>
  Number.isFinite(x)
    ? x >= 100
      ? Math.round(x).toLocaleString('en-US')
      : x.toFixed(x >= 10 ? 1 : 2)
    : String(x);
export function formatHarnessReplay(r: HarnessReplayResult): string {
  const figureRows = r.rows.flatMap((row) =>
    row.figures.map((f, i) => [
      i === 0 ? `${row.label} (${row.policy})` : '',
      HARNESS_FIGURES[f.figure].label,
      num(f.published),
      num(f.simulated),
      signedPct(f.simulated / f.published - 1),
    ]),
  );
  const gainRows = r.gains.map((g, i) => [
    i === 0 || r.gains[i - 1]!.label !== g.label ? g.label : '',
    HARNESS_FIGURES[g.figure].label,
    `${g.published.toFixed(2)}x`,
    `${g.simulated.toFixed(2)}x`,
    signedPct(g.simulated / g.published - 1),
  ]);
  const served = r.rows.map(
    (row) =>
      `${row.label}: ${row.completed} served, ${row.failed} not, hit rate ${(row.hitRate * 100).toFixed(1)} %`,
  );
  const header = ['policy', 'figure', 'published', 'simulated', 'diff'];
  return [
    ...replayHeading(r.run),
    '',
    grid(header, figureRows, 2),
    '',
    `gain over ${r.rows[0]!.label} (throughput: run / baseline; latency: baseline / run)`,
    grid(header, gainRows, 2),
    '',
    `simulated: ${served.join('; ')}`,
    ...r.run.notes.map((n) => `note: ${n}`),
  ].join('\n');
}

export function harnessReplayJson(r: HarnessReplayResult): string {
  return replayJsonLine(r.run, { rows: r.rows, gains: r.gains });
}
