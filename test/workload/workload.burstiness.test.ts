/**
 * Gamma inter-arrivals as `vllm bench serve --burstiness` draws them (src/workload/arrival.ts
 * `interArrivalMs`, over a workload's prompts by src/workload/shape.ts), and `--burstiness` on
 * `kvroute sim`: the mean gap is 1 / rate whatever the burstiness, the spread is the gamma's
 * (CV^2 = 1 / burstiness), burstiness 1 is the Poisson stream draw for draw and the gamma
 * sampler at shape 1 has the exponential's distribution; a burstiness <= 0 is a CLI error.
 * Every stream is seeded, so each check is a fixed computation, not a chance.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { UsageError } from '../../src/cli/args.ts';
import { parseSimFlags } from '../../src/cli/sim.ts';
import { Rng } from '../../src/util/rng.ts';
import { gammaSample, interArrivalMs } from '../../src/workload/arrival.ts';
import { buildWorkload } from '../../src/workload/spec.ts';
import type { Arrival } from '../../src/workload/workloads.ts';
import type { Workload } from '../../src/workload/types.ts';

const SAMPLES = 20_000;

function moments(xs: readonly number[]): { mean: number; variance: number } {
  const mean = xs.reduce((s, x) => s + x, 0) / xs.length;
  const variance = xs.reduce((s, x) => s + (x - mean) ** 2, 0) / (xs.length - 1);
  return { mean, variance };
}

describe('interArrivalMs', () => {
  test('property: the mean gap is 1 / rate and CV^2 is 1 / burstiness, over many samples', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0.1, max: 10, noNaN: true }),
        fc.double({ min: 0.5, max: 200, noNaN: true }),
        fc.integer({ min: 0, max: 2 ** 31 }),
        (burstiness, ratePerS, seed) => {
          const rng = new Rng(seed);
          const meanGapMs = 1000 / ratePerS;
          const xs = Array.from({ length: SAMPLES }, () =>
            interArrivalMs(rng, meanGapMs, burstiness),
          );
          assert.ok(xs.every((x) => x >= 0 && Number.isFinite(x)));
          const { mean, variance } = moments(xs);
          // Six standard errors: the mean's is meanGap / sqrt(burstiness x N); the variance's
          // relative one sqrt((2 + 6 / burstiness) / N) (a gamma's excess kurtosis is 6 / k).
          const meanTol = 6 / Math.sqrt(burstiness * SAMPLES);
          assert.ok(Math.abs(mean / meanGapMs - 1) < meanTol, `mean ${mean} of ${meanGapMs}`);
          const cv2 = variance / mean ** 2;
          const varTol = 6 * Math.sqrt((2 + 6 / burstiness) / SAMPLES) + meanTol * 2;
          assert.ok(Math.abs(cv2 * burstiness - 1) < varTol, `CV^2 ${cv2} at ${burstiness}`);
        },
      ),
      { numRuns: 25, seed: 55 },
    );
  });

  test('burstiness 1 is the Poisson stream, draw for draw', () => {
    const a = new Rng(7);
    const b = new Rng(7);
    for (let i = 0; i < 1000; i++) assert.equal(interArrivalMs(a, 25, 1), b.exponential(25));
    // The default is 1.
    assert.equal(interArrivalMs(new Rng(8), 25), new Rng(8).exponential(25));
  });

  test('the gamma sampler at shape 1 has the exponential distribution (Kolmogorov-Smirnov)', () => {
    for (const seed of [1, 2, 3]) {
      const rng = new Rng(seed);
      const xs = Array.from({ length: SAMPLES }, () => gammaSample(rng, 1)).sort((p, q) => p - q);
      let d = 0;
      xs.forEach((x, i) => {
        const cdf = 1 - Math.exp(-x);
        d = Math.max(d, Math.abs((i + 1) / xs.length - cdf), Math.abs(cdf - i / xs.length));
      });
      // The 0.1 % critical value of the one-sample test is 1.95 / sqrt(N).
      assert.ok(d < 1.95 / Math.sqrt(xs.length), `D = ${d} (seed ${seed})`);
    }
  });

  test('a shape <= 0 is refused', () => {
    assert.throws(() => gammaSample(new Rng(1), 0), RangeError);
    assert.throws(() => gammaSample(new Rng(1), -2), RangeError);
  });
});

function take(w: Workload): Arrival[] {
  const out: Arrival[] = [];
  const it = w.arrivals();
  for (let a = it.next(); !a.done; a = it.next()) out.push(a.value);
  return out;
}

describe('burstiness over a workload', () => {
  const opts = { seed: 9, blockSize: 16, durationMs: 600_000 };

  test('a rate with burstiness: the prompts in order, nondecreasing times, the rate held', () => {
    const plain = take(buildWorkload({ kind: 'synthetic', name: 'seed' }, opts));
    for (const burstiness of [0.25, 1, 4]) {
      const shaped = take(
        buildWorkload(
          { kind: 'synthetic', name: 'seed', shape: { kind: 'gamma', ratePerS: 5, burstiness } },
          opts,
        ),
      );
      for (let i = 1; i < shaped.length; i++) assert.ok(shaped[i]!.atMs >= shaped[i - 1]!.atMs);
      assert.ok(shaped.every((a) => a.atMs < opts.durationMs));
      // 600 s at 5 req/s: 3,000 expected; six standard errors of the count at this burstiness.
      const tol = 6 * Math.sqrt(3000 / burstiness);
      assert.ok(Math.abs(shaped.length - 3000) < tol, `${shaped.length} at ${burstiness}`);
      assert.deepEqual(
        shaped.slice(0, 50).map(({ atMs: _, ...rest }) => rest),
        plain.slice(0, 50).map(({ atMs: _, ...rest }) => rest),
      );
    }
  });

  test('a ladder at burstiness 1 is the ladder without one; other values move its times', () => {
    const stages = [
      { ratePerS: 4, durationS: 20 },
      { ratePerS: 9, durationS: 10 },
    ];
    const ladder = (burstiness?: number) =>
      take(
        buildWorkload(
          {
            kind: 'synthetic',
            name: 'seed',
            shape: { kind: 'ladder', stages, ...(burstiness !== undefined && { burstiness }) },
          },
          { ...opts, durationMs: undefined },
        ),
      );
    assert.deepEqual(ladder(1), ladder());
    assert.notDeepEqual(
      ladder(0.3).map((a) => a.atMs),
      ladder().map((a) => a.atMs),
    );
  });
});

describe('kvroute sim --burstiness', () => {
  const parse = (args: string[]) => {
    const p = parseSimFlags(args);
    assert.ok(p !== 'help');
    return p.base;
  };
  const refused = (args: string[], pattern: RegExp) =>
    assert.throws(
      () => parseSimFlags(args),
      (err: unknown) => err instanceof UsageError && pattern.test(err.message),
      args.join(' '),
    );

  test('with --rate: gamma arrivals for the run, its --duration and warm-up as with --rate', () => {
    const base = parse(['--rate', '6', '--burstiness', '0.5', '--duration', '120']);
    assert.deepEqual(base.workload.shape, { kind: 'gamma', ratePerS: 6, burstiness: 0.5 });
    assert.equal(base.durationMs, 120_000);
    assert.equal(base.warmupMs, 12_000);
  });

  test('with --rate-ladder: each stage’s gaps', () => {
    const base = parse(['--rate-ladder', '2x10,4x10', '--burstiness', '3']);
    assert.equal(base.workload.shape?.kind, 'ladder');
    assert.equal((base.workload.shape as { burstiness?: number }).burstiness, 3);
  });

  test('<= 0, not a number, or nothing to shape: a CLI error naming the flag', () => {
    for (const bad of ['0', '-1', 'bursty', '']) {
      refused(['--rate', '5', '--burstiness', bad], /--burstiness must be/);
    }
    refused(['--burstiness', '2'], /--burstiness shapes the gaps of --rate R or --rate-ladder/);
    refused(['--burst', '8', '--burstiness', '2'], /--burst sends everything at t = 0/);
    refused(['--rate', '5', '--burstiness', '2', '--concurrency', '3'], /drop --concurrency/);
  });
});
