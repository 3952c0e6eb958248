/**
 * The harness replay (src/sim/published/harnessReplay.ts) on a small made-up run: flags scaled
 * by `withFlag`, figures taken from the harness's summary, gains oriented by figure (throughput
 * run / baseline, latency baseline / run), and a setup without `--metrics-as` refused.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { publishedSetup } from '../../src/cli/sim.ts';
import { simulate } from '../../src/sim/run.ts';
import {
  type PublishedHarnessRun,
  replayHarness,
  withFlag,
} from '../../src/sim/published/harnessReplay.ts';

const RUN: PublishedHarnessRun = {
  name: 'small',
  title: 'a small made-up run',
  source: 'nowhere',
  setup: '2 replicas, 4 groups',
  simArgs: [
    ...['--workload', 'shared-prefix', '--num-groups', '4', '--num-prompts-per-group', '4'],
    ...['--replicas', '2', '--model', 'llama-3.1-8b', '--gpu', 'h100-sxm', '--tp', '1'],
    ...['--burst', '16', '--metrics-as', 'vllm'],
  ],
  runs: [
    {
      label: 'blind',
      policy: 'round-robin',
      published: { outputTokensPerS: 100, ttftMeanMs: 400 },
    },
    {
      label: 'aware',
      policy: 'llmd-precise',
      published: { outputTokensPerS: 150, ttftMeanMs: 100 },
    },
  ],
  notes: [],
};

describe('harness replay', () => {
  test('withFlag replaces a value or adds the flag', () => {
    assert.deepEqual(withFlag(['--a', '1', '--b', '2'], '--a', '3'), ['--a', '3', '--b', '2']);
    assert.deepEqual(withFlag(['--a', '1'], '--c', '4'), ['--a', '1', '--c', '4']);
  });

  test('figures from the harness summary, gains oriented by figure', () => {
    const r = replayHarness(RUN, publishedSetup);
    assert.equal(r.rows.length, 2);
    for (const row of r.rows) {
      assert.equal(row.completed, 16);
      assert.deepEqual(
        row.figures.map((f) => f.figure),
        ['outputTokensPerS', 'ttftMeanMs'],
      );
      assert.equal(row.figures[1]!.simulated, row.simulated.ttftMeanMs);
    }
    const [blind, aware] = r.rows;
    assert.deepEqual(
      r.gains.map((g) => [g.figure, g.published]),
      [
        ['outputTokensPerS', 1.5],
        ['ttftMeanMs', 4],
      ],
    );
    assert.equal(
      r.gains[0]!.simulated,
      aware!.simulated.outputTokensPerS / blind!.simulated.outputTokensPerS,
    );
    assert.equal(r.gains[1]!.simulated, blind!.simulated.ttftMeanMs / aware!.simulated.ttftMeanMs);
    // A smaller burst through withFlag.
    const small = replayHarness(RUN, publishedSetup, withFlag(RUN.simArgs, '--burst', '8'));
    assert.deepEqual(
      small.rows.map((row) => row.completed),
      [8, 8],
    );
  });

  test("a ladder's stage mean: the stages' output tok/s after the first (the warm-up), averaged", () => {
    const args = [
      ...RUN.simArgs.slice(0, RUN.simArgs.indexOf('--burst')),
      ...['--rate-ladder', '4x3,8x3,6x3', '--drain-stages', '1', '--metrics-as', 'inference-perf'],
    ];
    const ladder: PublishedHarnessRun = {
      ...RUN,
      simArgs: args,
      runs: [
        { label: 'blind', policy: 'round-robin', published: { stageMeanOutputTokensPerS: 1 } },
      ],
    };
    const r = replayHarness(ladder, publishedSetup);
    const stages = simulate({
      ...publishedSetup(args),
      router: { ...publishedSetup(args).router, policy: 'round-robin' },
    }).stages!;
    assert.equal(stages.length, 3);
    const mean = (stages[1]!.outputTokensPerS + stages[2]!.outputTokensPerS) / 2;
    assert.ok(mean > 0);
    assert.equal(r.rows[0]!.figures[0]!.simulated, mean);
    assert.notEqual(mean, r.rows[0]!.simulated.outputTokensPerS);
    // Without a ladder there are no stages to average.
    assert.ok(
      Number.isNaN(replayHarness(RUN, publishedSetup).rows[0]!.simulated.stageMeanOutputTokensPerS),
    );
  });

  test('a setup without --metrics-as is refused', () => {
    const args = RUN.simArgs.filter(
      (a, i, all) => a !== '--metrics-as' && all[i - 1] !== '--metrics-as',
    );
    assert.throws(() => replayHarness(RUN, publishedSetup, args), /needs --metrics-as/);
  });
});
