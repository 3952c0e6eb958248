/**
 * What a step table takes from a live engine beyond its fitted knots: the context-pair rate
 * from paired warm and cold chunks (src/calibrate/pairRate.ts), held in the fit; whether the
 * engine runs each sequence as its own pass (src/calibrate/passes.ts), and a table that says so
 * charging each prompt chunk of a step alone; the flag through a profile file; and bench:real's
 * flags (`--only fidelity`).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import fc from 'fast-check';
import { parseRealArgs } from '../../bench/realFigures.ts';
import { contextPairRate } from '../../src/calibrate/pairRate.ts';
import { PER_SEQUENCE_SHARE, perSequencePasses } from '../../src/calibrate/passes.ts';
import { readProfile, writeProfile } from '../../src/calibrate/profileFile.ts';
import {
  type CostProfile,
  fitStepTable,
  PROFILE_FORMAT,
  ProfileError,
  prefillChunks,
  profileFromData,
  type StepTable,
  type TableObservation,
  tableStepMs,
} from '../../src/model/index.ts';

const TABLE: StepTable = {
  prefillTokens: [64, 128, 256],
  prefillMs: [60, 70, 120],
  decodeSeqs: [1, 4],
  decodeMs: [40, 160],
  msPerContextPair: 5e-4,
  overheadMs: 0,
};

describe('the pair rate from paired chunks', () => {
  test('the median of (warm - cold) / pairs over every pair', () => {
    const rate = contextPairRate([
      { warmMs: 200, coldMs: 100, pairs: 100_000 }, // 1e-3
      { warmMs: 150, coldMs: 100, pairs: 100_000 }, // 5e-4
      { warmMs: 900, coldMs: 100, pairs: 100_000 }, // 8e-3: a burst on the warm side
    ]);
    assert.equal(rate, 1e-3);
    assert.equal(
      contextPairRate([
        { warmMs: 130, coldMs: 100, pairs: 10_000 },
        { warmMs: 110, coldMs: 100, pairs: 10_000 },
      ]),
      2e-3,
    );
  });

  test('never below 0; null with no pair that has context', () => {
    assert.equal(contextPairRate([{ warmMs: 90, coldMs: 100, pairs: 1000 }]), 0);
    assert.equal(contextPairRate([{ warmMs: 90, coldMs: 100, pairs: 0 }]), null);
    assert.equal(contextPairRate([]), null);
  });

  test('property: a drift shared by both sides of a pair does not move the rate', () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: 0, max: 500, noNaN: true }), { minLength: 1, maxLength: 9 }),
        fc.double({ min: 1e-6, max: 1e-2, noNaN: true }),
        (drifts, rate) => {
          const pairs = drifts.map((d) => ({
            coldMs: 100 + d,
            warmMs: 100 + d + rate * 1e5,
            pairs: 1e5,
          }));
          const got = contextPairRate(pairs)!;
          assert.ok(Math.abs(got - rate) <= 1e-9 * Math.max(1, rate), `${got} vs ${rate}`);
        },
      ),
      { numRuns: 100, seed: 27 },
    );
  });

  test('the fit holds a given pair rate and fits the rest around it', () => {
    const obs: TableObservation[] = [];
    for (const n of [64, 128, 256]) {
      obs.push({
        label: `prompt ${n}`,
        steps: [{ prefillTokens: n, decodeTokens: 0, kvTokensRead: 0 }],
        perRequest: true,
        measuredMs: 0,
      });
    }
    for (const context of [384, 768]) {
      obs.push({
        label: `warm ${context}`,
        steps: [{ prefillTokens: 256, decodeTokens: 0, kvTokensRead: context }],
        perRequest: true,
        measuredMs: 0,
      });
    }
    for (const b of [1, 4]) {
      obs.push({
        label: `decode ${b}`,
        steps: [{ prefillTokens: 0, decodeTokens: b, kvTokensRead: b * 300 }],
        perRequest: false,
        measuredMs: 0,
      });
    }
    for (const o of obs) o.measuredMs = o.steps.reduce((s, w) => s + tableStepMs(TABLE, w), 0);
    // Times as if attention cost twice the held rate: the held rate stays, the knots absorb
    // what they can, and the warm points are off by what the held rate leaves out.
    const held = fitStepTable(obs, { msPerContextPair: 2.5e-4 });
    assert.equal(held.table.msPerContextPair, 2.5e-4);
    assert.ok(!held.fixed.includes('msPerContextPair'), held.fixed.join());
    const exact = fitStepTable(obs, { msPerContextPair: 5e-4 });
    assert.ok(exact.maxErrorPct < 1e-6, String(exact.maxErrorPct));
    assert.ok(held.maxErrorPct > exact.maxErrorPct);
    assert.throws(
      () => fitStepTable(obs, { msPerContextPair: -1 }),
      /msPerContextPair must be >= 0/,
    );
  });
});

describe('one pass per sequence', () => {
  const decode = (batch: number, ms: number) => ({
    steps: [{ prefillTokens: 0, decodeTokens: batch, kvTokensRead: batch * 300 }],
    measuredMs: ms,
  });

  test('a batch of b decodes at about b x one decode runs a pass per sequence', () => {
    assert.equal(perSequencePasses([decode(1, 87), decode(1, 96), decode(4, 422)]), true);
    // vLLM on a GPU: the batch reads the weights once.
    assert.equal(perSequencePasses([decode(1, 20), decode(4, 22), decode(16, 30)]), false);
    // At the threshold, and just under it.
    assert.equal(perSequencePasses([decode(1, 10), decode(4, 40 * PER_SEQUENCE_SHARE)]), true);
    assert.equal(
      perSequencePasses([decode(1, 10), decode(4, 40 * PER_SEQUENCE_SHARE - 0.01)]),
      false,
    );
  });

  test('not measured: false', () => {
    assert.equal(perSequencePasses([decode(1, 87)]), false);
    assert.equal(perSequencePasses([decode(4, 400)]), false);
    assert.equal(perSequencePasses([]), false);
  });

  test('the table charges each prompt chunk of a step alone, decodes and pairs as before', () => {
    const entries = [
      { kind: 'prefill' as const, tokens: 28, contextTokens: 1350 },
      { kind: 'prefill' as const, tokens: 228, contextTokens: 1024 },
      { kind: 'decode' as const, tokens: 1, contextTokens: 1100 },
    ];
    const work = { prefillTokens: 256, decodeTokens: 1, kvTokensRead: 1101, entries };
    const pairs = 28 * 1350 + 228 * 1024 + 1101;
    const one = tableStepMs(TABLE, work);
    assert.ok(Math.abs(one - (120 + 40 + 5e-4 * pairs)) < 1e-9, String(one));
    const perSeq = { ...TABLE, perSequencePasses: true };
    assert.deepEqual(prefillChunks(perSeq, work), [28, 228]);
    // P(28) = 60 x 28 / 64; P(228) = 70 + 50 x 100 / 128.
    const expected = (60 * 28) / 64 + (70 + (50 * 100) / 128) + 40 + 5e-4 * pairs;
    assert.ok(Math.abs(tableStepMs(perSeq, work) - expected) < 1e-9);
    // One chunk, or no entries: the same as one pass.
    const single = { prefillTokens: 200, decodeTokens: 0, kvTokensRead: 0 };
    assert.equal(tableStepMs(perSeq, single), tableStepMs(TABLE, single));
  });

  test('the fit counts multi-chunk steps per chunk when told, and the table says so', () => {
    const obs: TableObservation[] = [64, 128, 256].map((n) => ({
      label: `prompt ${n}`,
      steps: [{ prefillTokens: n, decodeTokens: 0, kvTokensRead: 0 }],
      perRequest: false,
      measuredMs: 0,
    }));
    obs.push({
      label: 'two chunks',
      steps: [
        {
          prefillTokens: 192,
          decodeTokens: 0,
          kvTokensRead: 0,
          entries: [
            { kind: 'prefill', tokens: 64, contextTokens: 0 },
            { kind: 'prefill', tokens: 128, contextTokens: 0 },
          ],
        },
      ],
      perRequest: false,
      measuredMs: 0,
    });
    const truth = { ...TABLE, msPerContextPair: 0, perSequencePasses: true };
    for (const o of obs) o.measuredMs = o.steps.reduce((s, w) => s + tableStepMs(truth, w), 0);
    const fit = fitStepTable(obs, { perSequencePasses: true, msPerContextPair: 0 });
    assert.equal(fit.table.perSequencePasses, true);
    assert.deepEqual(fit.table.prefillTokens, [64, 128, 256]);
    assert.ok(fit.maxErrorPct < 1e-6, String(fit.maxErrorPct));
    assert.equal(fitStepTable(obs, { msPerContextPair: 0 }).table.perSequencePasses, undefined);
  });
});

describe('the flag in a profile file', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'kvroute-passes-'));
  after(() => rmSync(tmp, { recursive: true, force: true }));
  const profile = (table: Record<string, unknown>): CostProfile =>
    ({
      format: PROFILE_FORMAT,
      source: 'test',
      method: 'test',
      measuredOn: { model: 'llama-3.1-8b', gpu: 'h200', weightsDtype: 'bf16', kvDtype: 'bf16' },
      curves: [
        {
          tp: 1,
          overheadMs: 0,
          mfuMax: 0.5,
          halfTokens: 0,
          mbu: 0.8,
          requestOverheadMs: 0,
          fixed: [],
          objective: 'least-squares',
          maxErrorPct: 0,
          rmsErrorPct: 0,
          rooflineMaxErrorPct: 0,
          points: [],
          table: {
            ...TABLE,
            requestOverheadMs: 0,
            fixed: [],
            maxErrorPct: 0,
            rmsErrorPct: 0,
            ...table,
          },
        },
      ],
    }) as unknown as CostProfile;

  test('written and read back; absent reads as one pass', () => {
    const path = join(tmp, 'p.yaml');
    writeProfile(path, profile({ perSequencePasses: true }));
    assert.equal(readProfile(path).curves[0]!.table!.perSequencePasses, true);
    writeProfile(path, profile({}));
    assert.equal(readProfile(path).curves[0]!.table!.perSequencePasses, undefined);
  });

  test('not a boolean: a ProfileError naming the field', () => {
    const data = JSON.parse(JSON.stringify(profile({ perSequencePasses: 'yes' })));
    assert.throws(
      () => profileFromData(data),
      (err: unknown) =>
        err instanceof ProfileError &&
        /table\.perSequencePasses must be true or false/.test(err.message),
    );
  });
});

describe('bench:real flags', () => {
  test('--only fidelity, --json, --quick, --runtime', () => {
    assert.deepEqual(parseRealArgs(['--json', '--only', 'fidelity']), {
      json: true,
      quick: false,
      runtime: 'llama.cpp',
      only: 'fidelity',
      fidelityRequests: null,
      fidelityRuns: 1,
    });
    assert.equal(
      (
        parseRealArgs(['--only', 'fidelity', '--fidelity-requests', '64']) as {
          fidelityRequests: number;
        }
      ).fidelityRequests,
      64,
    );
    assert.deepEqual(parseRealArgs(['--quick', '--runtime', 'sim']), {
      json: false,
      quick: true,
      runtime: 'sim',
      only: null,
      fidelityRequests: null,
      fidelityRuns: 1,
    });
  });

  test('an unknown value or flag: one line naming what is accepted', () => {
    assert.equal(parseRealArgs(['--only', 'stall']), "--only must be one of fidelity, got 'stall'");
    assert.equal(parseRealArgs(['--only']), "--only must be one of fidelity, got ''");
    assert.equal(
      parseRealArgs(['--runtime', 'vllm']),
      "--runtime must be llama.cpp or sim, got 'vllm'",
    );
    for (const v of ['2', '6.5', 'many', undefined]) {
      assert.equal(
        parseRealArgs(['--fidelity-requests', ...(v === undefined ? [] : [v])]),
        `--fidelity-requests must be an integer from 4 to 1000, got '${v ?? ''}'`,
      );
    }
    assert.equal(
      (parseRealArgs(['--fidelity-runs', '5']) as { fidelityRuns: number }).fidelityRuns,
      5,
    );
    for (const v of ['0', '10', '2.5', 'x', undefined]) {
      assert.equal(
        parseRealArgs(['--fidelity-runs', ...(v === undefined ? [] : [v])]),
        `--fidelity-runs must be an integer from 1 to 9, got '${v ?? ''}'`,
      );
    }
    assert.match(parseRealArgs(['--fast']) as string, /^unknown flag '--fast': bench:real takes /);
  });
});

test('a knot the step overhead would push below 0: the overhead is held at 0 instead', () => {
  // Decodes timed faster than nothing beside a large step overhead (a busy host's noise).
  const obs: TableObservation[] = [
    {
      label: 'p64',
      steps: [{ prefillTokens: 64, decodeTokens: 0, kvTokensRead: 0 }],
      perRequest: false,
      measuredMs: 40,
    },
    {
      label: 'p128',
      steps: [{ prefillTokens: 128, decodeTokens: 0, kvTokensRead: 0 }],
      perRequest: false,
      measuredMs: 45,
    },
    {
      label: 'd1',
      steps: [{ prefillTokens: 0, decodeTokens: 1, kvTokensRead: 0 }],
      perRequest: false,
      measuredMs: 5,
    },
    {
      label: 'mixed',
      steps: [
        {
          prefillTokens: 64,
          decodeTokens: 1,
          kvTokensRead: 0,
          entries: [
            { kind: 'decode', tokens: 1, contextTokens: 0 },
            { kind: 'prefill', tokens: 64, contextTokens: 0 },
          ],
        },
      ],
      perRequest: false,
      measuredMs: 30,
    },
  ];
  // Solved freely: overhead 15, P(64) 25, P(128) 30, D(1) -10 (the mixed step below P(64)
  // alone). Clamping D(1) to 0 afterwards would mis-time every decode; holding the overhead,
  // which every step shares, at 0 fits the knots without it.
  const fit = fitStepTable(obs, { msPerContextPair: 0 });
  assert.equal(fit.table.overheadMs, 0);
  assert.ok(fit.fixed.includes('overheadMs'), fit.fixed.join());
  assert.ok(fit.table.decodeMs[0]! > 0, `${fit.table.decodeMs}`);
  for (const v of fit.table.prefillMs) assert.ok(v > 0, String(v));
});
