/**
 * Arrival shapes over a workload's prompts (src/workload/shape.ts): a burst sends the first N
 * prompts at 0; a rate ladder's arrivals are nondecreasing, fall in their stage's window, and
 * hold each stage's rate on average over seeds; the prompts keep the workload's order.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { buildWorkload } from '../../src/workload/spec.ts';
import { type LadderStage, shapeDurationMs, stageWindows } from '../../src/workload/shape.ts';
import type { Arrival } from '../../src/workload/workloads.ts';
import type { Workload } from '../../src/workload/types.ts';

function take(w: Workload, n = Number.POSITIVE_INFINITY): Arrival[] {
  const out: Arrival[] = [];
  const it = w.arrivals();
  for (let a = it.next(); !a.done && out.length < n; a = it.next()) out.push(a.value);
  return out;
}

const opts = (seed: number) => ({ seed, blockSize: 16, durationMs: undefined });

test('a burst: the workload’s first N prompts, in order, all at t = 0', () => {
  for (const name of ['seed', 'multiturn', 'groups'] as const) {
    const plain = take(buildWorkload({ kind: 'synthetic', name }, opts(3)), 40);
    const burst = take(
      buildWorkload({ kind: 'synthetic', name, shape: { kind: 'burst', requests: 40 } }, opts(3)),
    );
    assert.equal(burst.length, 40, name);
    assert.ok(
      burst.every((a) => a.atMs === 0),
      name,
    );
    assert.deepEqual(
      burst.map(({ atMs: _, ...rest }) => rest),
      plain.map(({ atMs: _, ...rest }) => rest),
      name,
    );
  }
  assert.equal(shapeDurationMs({ kind: 'burst', requests: 5 }), 0);
});

test('a ladder: arrivals nondecreasing, inside their stages, the workload’s prompts in order', () => {
  const stage = fc.record({
    ratePerS: fc.double({ min: 0.5, max: 40, noNaN: true }),
    durationS: fc.integer({ min: 1, max: 30 }),
  });
  fc.assert(
    fc.property(
      fc.array(stage, { minLength: 1, maxLength: 4 }),
      fc.integer({ min: 0, max: 1e6 }),
      (stages: LadderStage[], seed) => {
        const shape = { kind: 'ladder' as const, stages };
        const xs = take(buildWorkload({ kind: 'synthetic', name: 'seed', shape }, opts(seed)));
        const endMs = shapeDurationMs(shape);
        for (let i = 1; i < xs.length; i++) assert.ok(xs[i]!.atMs >= xs[i - 1]!.atMs);
        assert.ok(xs.every((a) => a.atMs >= 0 && a.atMs < endMs));
        const plain = take(
          buildWorkload({ kind: 'synthetic', name: 'seed' }, opts(seed)),
          xs.length,
        );
        assert.deepEqual(
          xs.map((a) => a.seed),
          plain.map((a) => a.seed),
        );
      },
    ),
    { numRuns: 40, seed: 55 },
  );
});

test('a ladder holds each stage’s rate on average over seeds', () => {
  const stages = [
    { ratePerS: 2, durationS: 60 },
    { ratePerS: 8, durationS: 30 },
    { ratePerS: 20, durationS: 20 },
  ];
  const windows = stageWindows(stages);
  const seeds = 30;
  const counts = windows.map(() => 0);
  for (let seed = 1; seed <= seeds; seed++) {
    const xs = take(
      buildWorkload(
        { kind: 'synthetic', name: 'seed', shape: { kind: 'ladder', stages } },
        opts(seed),
      ),
    );
    for (const a of xs)
      counts[windows.findIndex((w) => a.atMs >= w.startMs && a.atMs < w.endMs)]!++;
  }
  windows.forEach((w, i) => {
    const expected = w.ratePerS * ((w.endMs - w.startMs) / 1000);
    const mean = counts[i]! / seeds;
    // A Poisson count's mean over 30 seeds: 4 standard deviations of slack.
    const slack = 4 * Math.sqrt(expected / seeds);
    assert.ok(Math.abs(mean - expected) <= slack, `stage ${i}: mean ${mean}, expected ${expected}`);
  });
});

test('a ladder: the same seed gives the same arrivals, another seed others', () => {
  const shape = { kind: 'ladder' as const, stages: [{ ratePerS: 5, durationS: 10 }] };
  const a = take(buildWorkload({ kind: 'synthetic', name: 'hot', shape }, opts(9)));
  const b = take(buildWorkload({ kind: 'synthetic', name: 'hot', shape }, opts(9)));
  assert.deepEqual(a, b);
  const c = take(buildWorkload({ kind: 'synthetic', name: 'hot', shape }, opts(10)));
  assert.notDeepEqual(a, c);
});
