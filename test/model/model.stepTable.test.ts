/**
 * The measured step table: interpolation between knots, the attention pairs a step reads, the
 * least-squares fit recovering a known table from its own times, and the table in a profile
 * file (round trip, checks, and the cost model timing steps from it).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import fc from 'fast-check';
import { readProfile, writeProfile } from '../../src/calibrate/profileFile.ts';
import {
  type CostProfile,
  contextPairs,
  decodeStepMs,
  fitStepTable,
  knotWeights,
  makeReplicaSpec,
  mixedStepMs,
  nonDecreasing,
  PROFILE_FORMAT,
  ProfileError,
  prefillUsPerToken,
  profileFromData,
  type StepTable,
  type TableObservation,
  tableStepMs,
} from '../../src/model/index.ts';

const TABLE: StepTable = {
  prefillTokens: [64, 256, 1024],
  prefillMs: [10, 40, 200],
  decodeSeqs: [1, 4],
  decodeMs: [8, 20],
  msPerContextPair: 1e-5,
  overheadMs: 2,
};

describe('interpolation', () => {
  test('knot weights: 0 at 0, exact at knots, linear between, the last segment extended', () => {
    assert.deepEqual(knotWeights([64, 256], 0), [0, 0]);
    assert.deepEqual(knotWeights([64, 256], 32), [0.5, 0]);
    assert.deepEqual(knotWeights([64, 256], 64), [1, 0]);
    assert.deepEqual(knotWeights([64, 256], 160), [0.5, 0.5]);
    assert.deepEqual(knotWeights([64, 256], 256), [0, 1]);
    assert.deepEqual(knotWeights([64, 256], 448), [-1, 2]);
    assert.deepEqual(knotWeights([100], 250), [2.5]);
  });

  test('a step from the table: overhead, both curves and the pairs', () => {
    assert.equal(tableStepMs(TABLE, { prefillTokens: 0, decodeTokens: 0, kvTokensRead: 0 }), 0);
    // 640 prompt tokens: halfway from 256 (40) to 1024 (200) is 120; after 100 computed: 64,000 pairs.
    const chunk = { prefillTokens: 640, decodeTokens: 0, kvTokensRead: 100 };
    assert.equal(contextPairs(chunk), 64_000);
    assert.ok(Math.abs(tableStepMs(TABLE, chunk) - (2 + 120 + 0.64)) < 1e-9);
    // 2 decodes at contexts summing to 3,000: 8 + (20 - 8) / 3 = 12.
    const decodes = { prefillTokens: 0, decodeTokens: 2, kvTokensRead: 3000 };
    assert.ok(Math.abs(tableStepMs(TABLE, decodes) - (2 + 12 + 0.03)) < 1e-9);
  });

  test('with entries, pairs are counted per request', () => {
    const work = {
      prefillTokens: 300,
      decodeTokens: 2,
      kvTokensRead: 0,
      entries: [
        { kind: 'decode' as const, tokens: 1, contextTokens: 999 },
        { kind: 'decode' as const, tokens: 1, contextTokens: 1999 },
        { kind: 'prefill' as const, tokens: 200, contextTokens: 512 },
        { kind: 'prefill' as const, tokens: 100, contextTokens: 0 },
      ],
    };
    assert.equal(contextPairs(work), 1000 + 2000 + 200 * 512);
  });
});

/** The times a table gives the observations of a live calibration (TTFTs, decodes, mixed). */
function observationsOf(table: StepTable, requestOverheadMs: number): TableObservation[] {
  const budget = 512;
  const obs: TableObservation[] = [];
  for (const n of [64, 128, 256, 512, 1024, 2048]) {
    const steps = [];
    for (let done = 0; done < n; done += budget) {
      steps.push({
        prefillTokens: Math.min(budget, n - done),
        decodeTokens: 0,
        kvTokensRead: done,
      });
    }
    obs.push({ label: `prompt ${n}`, steps, perRequest: true, measuredMs: 0 });
  }
  for (const batch of [1, 4, 16]) {
    for (const context of [256, 2048]) {
      const step = { prefillTokens: 0, decodeTokens: batch, kvTokensRead: batch * context };
      obs.push({
        label: `decode ${batch}x${context}`,
        steps: [step],
        perRequest: false,
        measuredMs: 0,
      });
    }
  }
  for (const context of [64, 1024]) {
    const step = {
      prefillTokens: budget / 2,
      decodeTokens: 1,
      kvTokensRead: context + 1,
      entries: [
        { kind: 'decode' as const, tokens: 1, contextTokens: context },
        { kind: 'prefill' as const, tokens: budget / 2, contextTokens: 0 },
      ],
    };
    obs.push({ label: `mixed ${context}`, steps: [step], perRequest: false, measuredMs: 0 });
  }
  for (const o of obs) {
    o.measuredMs =
      (o.perRequest ? requestOverheadMs : 0) +
      o.steps.reduce((s, w) => s + tableStepMs(table, w), 0);
  }
  return obs;
}

describe('fit', () => {
  const truth: StepTable = {
    prefillTokens: [64, 128, 256, 512],
    prefillMs: [9, 17, 36, 80],
    decodeSeqs: [1, 4, 16],
    decodeMs: [7, 16, 55],
    msPerContextPair: 2e-5,
    overheadMs: 1.5,
  };

  test('recovers a table from its own times, overheads included', () => {
    const fit = fitStepTable(observationsOf(truth, 3));
    assert.deepEqual(fit.fixed, []);
    assert.deepEqual(fit.table.prefillTokens, truth.prefillTokens);
    assert.deepEqual(fit.table.decodeSeqs, truth.decodeSeqs);
    const close = (a: number, b: number) => Math.abs(a - b) <= 1e-6 * Math.max(1, Math.abs(b));
    assert.ok(close(fit.requestOverheadMs, 3), String(fit.requestOverheadMs));
    assert.ok(close(fit.table.overheadMs, 1.5), String(fit.table.overheadMs));
    assert.ok(close(fit.table.msPerContextPair, 2e-5));
    for (const [i, v] of fit.table.prefillMs.entries()) assert.ok(close(v, truth.prefillMs[i]!));
    for (const [i, v] of fit.table.decodeMs.entries()) assert.ok(close(v, truth.decodeMs[i]!));
    assert.ok(fit.maxErrorPct < 1e-6);
  });

  test('without mixed steps the step overhead cannot be told apart and is held at 0', () => {
    const obs = observationsOf(truth, 3).filter((o) => !o.label.startsWith('mixed'));
    const fit = fitStepTable(obs);
    assert.deepEqual(fit.fixed, ['overheadMs']);
    assert.equal(fit.table.overheadMs, 0);
    // The points themselves are still reproduced: the overhead moved into the knots.
    assert.ok(fit.maxErrorPct < 1e-6, String(fit.maxErrorPct));
  });

  test('property: any rising table with a mixed step is recovered and reproduces its points', () => {
    const positive = fc.double({ min: 0.1, max: 100, noNaN: true });
    fc.assert(
      fc.property(
        fc.array(positive, { minLength: 4, maxLength: 4 }),
        fc.array(positive, { minLength: 3, maxLength: 3 }),
        fc.double({ min: 0, max: 1e-4, noNaN: true }),
        fc.double({ min: 0, max: 10, noNaN: true }),
        fc.double({ min: 0, max: 10, noNaN: true }),
        (p, d, pair, overhead, request) => {
          // Knots rise with the step's size (what the fit keeps): increments summed.
          const rising = (xs: number[]) =>
            xs.map((_, i) => xs.slice(0, i + 1).reduce((a, b) => a + b, 0));
          const table = {
            ...truth,
            prefillMs: rising(p),
            decodeMs: rising(d),
            msPerContextPair: pair,
            overheadMs: overhead,
          };
          const fit = fitStepTable(observationsOf(table, request));
          assert.ok(fit.maxErrorPct < 1e-4, `${fit.maxErrorPct} ${JSON.stringify(fit)}`);
        },
      ),
      { numRuns: 60, seed: 27 },
    );
  });

  test('noise: relative errors stay near the noise', () => {
    let state = 7;
    const noise = () => {
      state = (state * 1103515245 + 12345) % 2 ** 31;
      return 1 + 0.04 * (state / 2 ** 31 - 0.5);
    };
    const obs = observationsOf(truth, 3).map((o) => ({ ...o, measuredMs: o.measuredMs * noise() }));
    const fit = fitStepTable(obs);
    assert.ok(fit.maxErrorPct < 5, String(fit.maxErrorPct));
  });

  test('knots come out non-decreasing: a slower small step is pooled with the next', () => {
    assert.deepEqual(nonDecreasing([1, 3, 2, 4]), [1, 2.5, 2.5, 4]);
    assert.deepEqual(nonDecreasing([5, 1, 1]), [7 / 3, 7 / 3, 7 / 3]);
    assert.deepEqual(nonDecreasing([1, 2, 3]), [1, 2, 3]);
    // A 64-token prompt timed slower than the 128-token one (a busy moment).
    const obs = observationsOf(truth, 3).map((o) =>
      o.label === 'prompt 64' ? { ...o, measuredMs: o.measuredMs * 3 } : o,
    );
    const { prefillMs } = fitStepTable(obs).table;
    for (let i = 1; i < prefillMs.length; i++) assert.ok(prefillMs[i]! >= prefillMs[i - 1]!);
  });

  test('too few points is an error', () => {
    assert.throws(() => fitStepTable([]), /at least 2 measured points/);
  });
});

describe('a table in a profile', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'kvroute-table-'));
  after(() => rmSync(tmp, { recursive: true, force: true }));
  const curve = {
    tp: 1,
    mfuMax: 0.01,
    halfTokens: 10,
    mbu: 0.01,
    overheadMs: 1,
    requestOverheadMs: 0,
    fixed: [],
    objective: 'least-squares' as const,
    maxErrorPct: 30,
    rmsErrorPct: 20,
    rooflineMaxErrorPct: 99,
    points: [],
  };
  const profile: CostProfile = {
    format: PROFILE_FORMAT,
    source: 'live http://127.0.0.1:1',
    method: 'test',
    measuredOn: { model: 'llama-3.1-8b', gpu: 'h200', weightsDtype: 'bf16', kvDtype: 'bf16' },
    curves: [
      {
        ...curve,
        table: { ...TABLE, requestOverheadMs: 3, fixed: [], maxErrorPct: 2, rmsErrorPct: 1 },
      },
    ],
  };

  test('round trip through the file', () => {
    const path = join(tmp, 'table.yaml');
    writeProfile(path, profile);
    assert.deepEqual(readProfile(path), profile);
  });

  test('the cost model times steps from the table; the curve alone does not', () => {
    const withTable = makeReplicaSpec({
      model: 'llama-3.1-8b',
      tp: 1,
      weightsDtype: 'bf16',
      profile,
    });
    const work = { prefillTokens: 640, decodeTokens: 0, kvTokensRead: 100 };
    assert.equal(mixedStepMs(withTable, work), tableStepMs(TABLE, work));
    assert.equal(
      decodeStepMs(withTable, 2, 1500),
      tableStepMs(TABLE, { prefillTokens: 0, decodeTokens: 2, kvTokensRead: 3000 }),
    );
    assert.equal(prefillUsPerToken(withTable, 256), ((2 + 40) / 256) * 1e3);
    const curveOnly = makeReplicaSpec({
      model: 'llama-3.1-8b',
      tp: 1,
      weightsDtype: 'bf16',
      profile: { ...profile, curves: [curve] },
    });
    assert.notEqual(mixedStepMs(curveOnly, work), tableStepMs(TABLE, work));
    assert.equal(curveOnly.calibration?.table, undefined);
  });

  const bad: [string, unknown, RegExp][] = [
    [
      'unsorted knots',
      { ...TABLE, prefillTokens: [256, 64, 1024] },
      /prefillTokens must be ascending numbers > 0/,
    ],
    [
      'lengths apart',
      { ...TABLE, decodeMs: [1] },
      /decodeSeqs and decodeMs must be lists of the same length/,
    ],
    [
      'a negative pair rate',
      { ...TABLE, msPerContextPair: -1 },
      /msPerContextPair must be a number >= 0/,
    ],
  ];
  for (const [what, table, message] of bad) {
    test(`refuses ${what}`, () => {
      const data = {
        ...profile,
        curves: [{ ...curve, table: { ...(table as object), maxErrorPct: 1, rmsErrorPct: 1 } }],
      };
      assert.throws(
        () => profileFromData(data),
        (err: unknown) =>
          err instanceof ProfileError &&
          message.test((err as Error).message) &&
          /curves\[0\]\.table/.test((err as Error).message),
      );
    });
  }
});
