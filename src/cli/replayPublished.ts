/**
 * `kvroute sim --replay-published NAME`: a published run's setup (src/sim/published/) simulated
 * for its cache-blind and its cache-aware policy, the published figures beside the simulated
 * ones: hit rates, token/s and the throughput ratio.
 */
import { PUBLISHED_RUNS } from '../sim/published/index.ts';
import { type ReplayFigures, ReplayTally } from '../sim/published/figures.ts';
import type { PublishedRun } from '../sim/published/types.ts';
import { simulate } from '../sim/run.ts';
import type { SimConfig } from '../sim/run.ts';

export interface ReplayRow {
  label: string;
  policy: string;
  published: { hitRate: number; tokensPerS: number };
  simulated: ReplayFigures;
}

export interface ReplayResult {
  run: PublishedRun;
  rows: ReplayRow[];
  published: { ratio: number };
  simulated: { ratio: number };
}

/** Simulates each of the run's policies on `base` (the run's setup, parsed from its flags). */
export function replayPublished(name: string, base: SimConfig): ReplayResult {
  const run = PUBLISHED_RUNS[name]!;
  const workload =
    base.workload.kind === 'synthetic' ? { ...base.workload, burst: run.burst } : base.workload;
  const rows = run.runs.map((p) => {
    const tally = new ReplayTally(run.outputTokens, run.hitCount);
    simulate({
      ...base,
      workload,
      router: { ...base.router, policy: p.policy },
      onRequest: (r) => tally.add(r),
    });
    return {
      label: p.label,
      policy: p.policy,
      published: { hitRate: p.hitRate, tokensPerS: p.tokensPerS },
      simulated: tally.figures(),
    };
  });
  const ratio = (f: (r: ReplayRow) => number) => f(rows[1]!) / f(rows[0]!);
  return {
    run,
    rows,
    published: { ratio: ratio((r) => r.published.tokensPerS) },
    simulated: { ratio: ratio((r) => r.simulated.tokensPerS) },
  };
}

const pct = (x: number) => `${(x * 100).toFixed(1)} %`;
const int = (x: number) => Math.round(x).toLocaleString('en-US');
const signed = (x: number) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)} %`;

export function formatReplay(r: ReplayResult): string {
  const header = ['policy', 'hit pub', 'hit sim', 'points', 'tok/s pub', 'tok/s sim', 'diff'];
  const rows = r.rows.map((row) => [
    `${row.label} (${row.policy})`,
    pct(row.published.hitRate),
    pct(row.simulated.hitRate),
    ((row.simulated.hitRate - row.published.hitRate) * 100).toFixed(1),
    int(row.published.tokensPerS),
    int(row.simulated.tokensPerS),
    signed(row.simulated.tokensPerS / row.published.tokensPerS - 1),
  ]);
  rows.push([
    'throughput ratio',
    '',
    '',
    '',
    r.published.ratio.toFixed(2),
    r.simulated.ratio.toFixed(2),
    signed(r.simulated.ratio / r.published.ratio - 1),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [
    `${r.run.title}`,
    `source: ${r.run.source}`,
    `setup: ${r.run.setup}`,
    `as: kvroute sim ${r.run.simArgs.join(' ')} (all ${r.rows[0]!.simulated.requests} prompts at time 0, ${r.run.burst.order})`,
    '',
    line(header),
    widths.map((w) => '-'.repeat(w)).join('  '),
    ...rows.map(line),
    '',
    ...r.run.notes.map((n) => `note: ${n}`),
  ].join('\n');
}

export function replayJson(r: ReplayResult): string {
  return JSON.stringify({
    name: r.run.name,
    source: r.run.source,
    rows: r.rows,
    ratio: { published: r.published.ratio, simulated: r.simulated.ratio },
  });
}
