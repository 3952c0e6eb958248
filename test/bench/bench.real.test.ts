/**
 * The figures of `npm run bench:real` from canned records (bench/realFigures.ts): no engine, no
 * clock. The bench's own runs are timing and live in bench/real.ts.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  cpuTicksOf,
  fidelityFigure,
  fidelityOverRuns,
  gapsInWindow,
  routingFigure,
  runFigures,
  stallFigure,
  stealPct,
  warmColdFigure,
} from '../../bench/realFigures.ts';

describe('warm against cold', () => {
  const sample = (warm: number, cold: number) => ({
    warmTtftMs: warm,
    coldTtftMs: cold,
    warmCachedTokens: 1536,
    promptTokens: 1600,
  });

  test('medians of both, their ratio, and the 0.5 x target', () => {
    const f = warmColdFigure([sample(40, 300), sample(60, 280), sample(500, 310)]);
    assert.deepEqual(f.warmTtftMs, { p50: 60, count: 3 });
    assert.deepEqual(f.coldTtftMs, { p50: 300, count: 3 });
    assert.equal(f.ratio, 0.2);
    assert.equal(f.warmCachedTokensP50, 1536);
    assert.equal(f.met, true);
  });

  test('a warm turn that was not served from cache misses the target', () => {
    const f = warmColdFigure([sample(200, 300), sample(180, 280)]);
    assert.equal(f.met, false);
  });

  test('no samples is an error, not a figure', () => {
    assert.throws(() => warmColdFigure([]), /no samples/);
  });
});

describe('the stall', () => {
  test('gaps that overlap the window, from every stream', () => {
    const a = [0, 10, 20, 500, 510, 520];
    const b = [5, 15, 25, 505, 515];
    // Window 100..505: a's 20->500 and 500->510 overlap it, b's 25->505 too; 505->515 starts
    // at its end.
    assert.deepEqual(gapsInWindow([a, b], 100, 505), [480, 10, 480]);
    // From 15: b's 15->25 counts too (it ends after the window opened).
    assert.deepEqual(gapsInWindow([b], 15, 505), [10, 480]);
  });

  test('p99 per budget, budgets ascending; met when the small budget stalls less', () => {
    const small = {
      budget: 256,
      gapsMs: [20, 30, 40, 90],
      longTtftMs: [900],
      longPromptTokens: 3900,
    };
    const large = {
      budget: 4096,
      gapsMs: [20, 25, 2400],
      longTtftMs: [700],
      longPromptTokens: 3900,
    };
    const f = stallFigure([large, small]);
    assert.deepEqual(f.budgets, [256, 4096]);
    assert.deepEqual(f.runningTpotP99Ms, [90, 2400]);
    assert.deepEqual(f.longTtftP50Ms, [900, 700]);
    assert.deepEqual(f.gaps, [4, 3]);
    assert.equal(f.met, true);
    assert.equal(stallFigure([{ ...small, gapsMs: [3000] }, large]).met, false);
  });

  test('a budget without a gap in the window is an error', () => {
    assert.throws(
      () => stallFigure([{ budget: 256, gapsMs: [], longTtftMs: [1], longPromptTokens: 1 }]),
      /no gaps at budget 256/,
    );
  });
});

describe('routing and fidelity', () => {
  const result = (p50: number, p99: number, hitRate: number | null) =>
    runFigures({ ttftMs: { p50, p99 }, hitRate, completed: 80, errors: 0 });

  test('delay-cost against random, from `bench --json` results', () => {
    const f = routingFigure(result(90, 400.04, 0.61234), result(200, 900, 0.3));
    assert.deepEqual(f, {
      'delay-cost': { ttftP99Ms: 400, hitRate: 0.612 },
      random: { ttftP99Ms: 900, hitRate: 0.3 },
      met: true,
    });
    assert.equal(routingFigure(result(90, 900, 0.6), result(90, 900, 0.3)).met, false);
  });

  test('errors are (sim - live) / live; the request overhead is reported beside them', () => {
    const f = fidelityFigure(
      { ttftP50Ms: 200, ttftP99Ms: 1000 },
      { ttftP50Ms: 180, ttftP99Ms: 1200 },
      10,
    );
    assert.equal(f.ttftP50ErrPct, -10);
    assert.equal(f.ttftP99ErrPct, 20);
    assert.equal(f.met, false);
    assert.equal(f.requestOverheadMs, 10);
    const close = fidelityFigure(
      { ttftP50Ms: 200, ttftP99Ms: 1000 },
      { ttftP50Ms: 230, ttftP99Ms: 850 },
      0,
    );
    assert.equal(close.met, true);
  });

  test('several runs: judged on the median of each error, every run kept', () => {
    const run = (p50: number, p99: number) =>
      fidelityFigure({ ttftP50Ms: 100, ttftP99Ms: 400 }, { ttftP50Ms: p50, ttftP99Ms: p99 }, 4);
    // p50 errors -30, -10, +5 (median -10); p99 errors -20, +25, -5 (median -5).
    const f = fidelityOverRuns([run(70, 320), run(90, 500), run(105, 380)]);
    assert.equal(f.ttftP50ErrPct, -10);
    assert.equal(f.ttftP99ErrPct, -5);
    assert.equal(f.met, true);
    assert.deepEqual(f.sim, { ttftP50Ms: 90, ttftP99Ms: 380 });
    assert.equal(f.runs.length, 3);
    assert.equal(f.runs[0]!.ttftP50ErrPct, -30);
    // An even count takes the mean of the middle two: p50 errors -30 and -20 give -25, missed.
    const two = fidelityOverRuns([run(70, 400), run(80, 400)]);
    assert.equal(two.ttftP50ErrPct, -25);
    assert.equal(two.met, false);
    assert.throws(() => fidelityOverRuns([]), { message: 'no fidelity runs' });
  });
});

describe("the host's steal time", () => {
  const stat = (steal: number, idle: number) =>
    `cpu  100 0 50 ${idle} 0 0 5 ${steal} 0 0\ncpu0 50 0 25 ${idle / 2} 0 0 2 ${steal / 2} 0 0\n`;

  test('read from the cpu line; its share of the ticks between two readings', () => {
    assert.deepEqual(cpuTicksOf(stat(40, 800)), { total: 995, steal: 40 });
    // 100 more ticks, 25 of them stolen.
    assert.equal(stealPct(cpuTicksOf(stat(40, 800)), cpuTicksOf(stat(65, 875))), 25);
  });

  test('unknown off Linux, or with no time between', () => {
    assert.equal(cpuTicksOf('intr 1 2 3\n'), null);
    assert.equal(stealPct(null, cpuTicksOf(stat(1, 1))), null);
    assert.equal(stealPct(cpuTicksOf(stat(1, 1)), cpuTicksOf(stat(1, 1))), null);
  });
});
