/**
 * `kvroute sim --replay-published NAME`: a published run's setup (src/sim/published/) simulated
 * for its cache-blind and its cache-aware policy, the published figures beside the simulated
 * ones: hit rates, token/s and the throughput ratio.
 */
import { PUBLISHED_RUNS } from '../sim/published/index.ts';
import { type ReplayFigures, ReplayTally } from '../sim/published/figures.ts';
import { replayHeading, replayJsonLine, signedPct } from '../sim/published/replayText.ts';
import type { PublishedRun } from '../sim/published/types.ts';
import { simulate } from '../sim/run.ts';
import type { SimConfig } from '../sim/run.ts';
import { grid } from '../util/textTable.ts';

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
export function formatReplay(r: ReplayResult): string {
  const header = ['policy', 'hit pub', 'hit sim', 'points', 'tok/s pub', 'tok/s sim', 'diff'];
  const rows = r.rows.map((row) => [
    `${row.label} (${row.policy})`,
    pct(row.published.hitRate),
    pct(row.simulated.hitRate),
    ((row.simulated.hitRate - row.published.hitRate) * 100).toFixed(1),
    int(row.published.tokensPerS),
    int(row.simulated.tokensPerS),
    signedPct(row.simulated.tokensPerS / row.published.tokensPerS - 1),
  ]);
  rows.push([
    'throughput ratio',
    '',
    '',
    '',
    r.published.ratio.toFixed(2),
    r.simulated.ratio.toFixed(2),
    signedPct(r.simulated.ratio / r.published.ratio - 1),
  ]);
  return [
    ...replayHeading(
      r.run,
      ` (all ${r.rows[0]!.simulated.requests} prompts at time 0, ${r.run.burst.order})`,
    ),
    '',
    grid(header, rows),
    '',
    ...r.run.notes.map((n) => `note: ${n}`),
  ].join('\n');
}

export function replayJson(r: ReplayResult): string {
  return replayJsonLine(r.run, {
    rows: r.rows,
    ratio: { published: r.published.ratio, simulated: r.simulated.ratio },
  });
}
