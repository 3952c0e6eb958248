/**
 * The step table's pair rate by context (a chunk after c tokens charged its attention pairs at
 * the rate measured near c), its measurement from warm/cold pairs grouped by context, its fit,
 * and a profile's table reaching the cost model whole: the rates by context and
 * `perSequencePasses` both, so `sim --profile` charges what the table says.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import fc from 'fast-check';
import { contextPairRate, contextPairRates } from '../../src/calibrate/pairRate.ts';
import { readProfile, writeProfile } from '../../src/calibrate/profileFile.ts';
import {
  type CostProfile,
  contextPairMs,
  contextPairs,
  fitStepTable,
  makeReplicaSpec,
  mixedStepMs,
  ProfileError,
  pairRateAt,
  profileFromData,
  type StepTable,
  type TableObservation,
  tableStepMs,
} from '../../src/model/index.ts';
import { tableProfile } from '../support/tableProfile.ts';

const FLAT: StepTable = {
  prefillTokens: [64, 256],
  prefillMs: [20, 55],
  decodeSeqs: [1, 4],
  decodeMs: [36, 120],
  msPerContextPair: 1e-3,
  overheadMs: 2,
};
const RISING: StepTable = {
  ...FLAT,
  pairRateContextTokens: [512, 1024],
  msPerContextPairAt: [0.4e-3, 2e-3],
};

describe('the rate at a context', () => {
  test('the nearest below the first and past the last, linear between', () => {
    assert.equal(pairRateAt(RISING, 100), 0.4e-3);
    assert.equal(pairRateAt(RISING, 512), 0.4e-3);
    assert.ok(Math.abs(pairRateAt(RISING, 768) - 1.2e-3) < 1e-12);
    assert.equal(pairRateAt(RISING, 1024), 2e-3);
    assert.equal(pairRateAt(RISING, 4096), 2e-3);
    assert.equal(pairRateAt(FLAT, 768), 1e-3);
  });

  test('without rates by context: the single rate times the pairs, exactly as before', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 512 }),
        fc.integer({ min: 0, max: 4 }),
        fc.integer({ min: 0, max: 8192 }),
        (prefillTokens, decodeTokens, kvTokensRead) => {
          const work = { prefillTokens, decodeTokens, kvTokensRead };
          assert.equal(contextPairMs(FLAT, work), FLAT.msPerContextPair * contextPairs(work));
        },
      ),
    );
  });

  test('each entry is charged at its own context', () => {
    const work = {
      prefillTokens: 256,
      decodeTokens: 1,
      kvTokensRead: 1024,
      entries: [
        { kind: 'prefill' as const, tokens: 256, contextTokens: 768 },
        { kind: 'decode' as const, tokens: 1, contextTokens: 1023 },
      ],
    };
    const expected = 256 * 768 * pairRateAt(RISING, 768) + 1 * 1024 * pairRateAt(RISING, 1023);
    assert.ok(Math.abs(contextPairMs(RISING, work) - expected) < 1e-9);
    // A long context costs more per pair than a short one.
    const at = (c: number) =>
      tableStepMs(RISING, { prefillTokens: 256, decodeTokens: 0, kvTokensRead: c }) -
      tableStepMs(RISING, { prefillTokens: 256, decodeTokens: 0, kvTokensRead: 0 });
    assert.ok(at(1024) / (256 * 1024) > at(512) / (256 * 512));
  });
});

describe('rates from warm/cold pairs by context', () => {
  const pair = (contextTokens: number, rate: number, coldMs = 50) => ({
    warmMs: coldMs + rate * 256 * contextTokens,
    coldMs,
    pairs: 256 * contextTokens,
    contextTokens,
  });

  test("each context's median, ascending; the single rate is the median of all", () => {
    const pairs = [
      pair(1280, 2e-3),
      pair(640, 0.5e-3),
      pair(1280, 2.2e-3),
      pair(640, 0.6e-3),
      pair(640, 9e-3),
      pair(1280, 1.8e-3, 80),
    ];
    const r = contextPairRates(pairs)!;
    assert.deepEqual(r.contextTokens, [640, 1280]);
    assert.ok(Math.abs(r.msPerPair[0]! - 0.6e-3) < 1e-12);
    assert.ok(Math.abs(r.msPerPair[1]! - 2e-3) < 1e-12);
    assert.ok(contextPairRate(pairs)! > 0);
  });

  test('one context, or pairs without one: null (the single rate says it all)', () => {
    assert.equal(contextPairRates([pair(640, 1e-3), pair(640, 2e-3)]), null);
    assert.equal(contextPairRates([{ warmMs: 60, coldMs: 50, pairs: 1000 }]), null);
    assert.equal(contextPairRates([]), null);
  });
});

describe('the fit holds the rates by context', () => {
  const obs = (label: string, steps: TableObservation['steps']): TableObservation => ({
    label,
    steps,
    perRequest: true,
    measuredMs: 0,
  });
  const timed = (o: TableObservation): TableObservation => ({
    ...o,
    measuredMs: 10 + o.steps.reduce((s, w) => s + tableStepMs(RISING, w), 0),
  });
  const points = [
    obs('64', [{ prefillTokens: 64, decodeTokens: 0, kvTokensRead: 0 }]),
    obs('256', [{ prefillTokens: 256, decodeTokens: 0, kvTokensRead: 0 }]),
    obs('512', [
      { prefillTokens: 256, decodeTokens: 0, kvTokensRead: 0 },
      { prefillTokens: 256, decodeTokens: 0, kvTokensRead: 256 },
    ]),
    obs('warm 512', [{ prefillTokens: 256, decodeTokens: 0, kvTokensRead: 512 }]),
    obs('warm 1024', [{ prefillTokens: 256, decodeTokens: 0, kvTokensRead: 1024 }]),
    {
      label: 'mixed',
      steps: [
        { prefillTokens: 0, decodeTokens: 1, kvTokensRead: 100 },
        { prefillTokens: 256, decodeTokens: 1, kvTokensRead: 101 },
      ],
      perRequest: false,
      measuredMs: 0,
    },
    {
      label: 'decode 4',
      steps: [{ prefillTokens: 0, decodeTokens: 4, kvTokensRead: 4000 }],
      perRequest: false,
      measuredMs: 0,
    },
  ].map((o) =>
    o.perRequest
      ? timed(o)
      : { ...o, measuredMs: o.steps.reduce((s, w) => s + tableStepMs(RISING, w), 0) },
  );

  test('fits the rest around the held rates, reproduces every point and keeps the rates', () => {
    const fit = fitStepTable(points, {
      msPerContextPair: 1e-3,
      pairRatesByContext: { contextTokens: [512, 1024], msPerPair: [0.4e-3, 2e-3] },
    });
    assert.deepEqual(fit.table.pairRateContextTokens, [512, 1024]);
    assert.deepEqual(fit.table.msPerContextPairAt, [0.4e-3, 2e-3]);
    assert.equal(fit.table.msPerContextPair, 1e-3);
    assert.ok(fit.maxErrorPct < 1e-6, `max error ${fit.maxErrorPct} %`);
    assert.ok(!fit.fixed.includes('msPerContextPair'));
    assert.ok(Math.abs(fit.requestOverheadMs - 10) < 1e-6);
    // Held at one rate instead, the same points are missed: the rates by context are what fits.
    const flat = fitStepTable(points, { msPerContextPair: 1e-3 });
    assert.ok(flat.maxErrorPct > 1, `one rate misses by ${flat.maxErrorPct} %`);
  });

  test('bad rates: a fit error', () => {
    assert.throws(
      () =>
        fitStepTable(points, {
          pairRatesByContext: { contextTokens: [1024, 512], msPerPair: [1, 2] },
        }),
      /pairRateContextTokens must be ascending/,
    );
  });
});

describe('a profile table reaches the cost model whole', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'kvroute-pair-context-'));
  after(() => rmSync(tmp, { recursive: true, force: true }));
  const profile = (table: Record<string, unknown>): CostProfile => tableProfile(table);
  const spec = (p: CostProfile) =>
    makeReplicaSpec({ model: 'llama-3.1-8b', tp: 1, weightsDtype: 'bf16', profile: p });
  const twoChunks = {
    prefillTokens: 256,
    decodeTokens: 0,
    kvTokensRead: 0,
    entries: [
      { kind: 'prefill' as const, tokens: 128, contextTokens: 0 },
      { kind: 'prefill' as const, tokens: 128, contextTokens: 900 },
    ],
  };

  test('written and read back; the spec times steps with both fields', () => {
    const path = join(tmp, 'p.yaml');
    writeProfile(path, profile({ ...RISING, perSequencePasses: true }));
    const read = readProfile(path);
    assert.deepEqual(read.curves[0]!.table!.pairRateContextTokens, [512, 1024]);
    assert.deepEqual(read.curves[0]!.table!.msPerContextPairAt, [0.4e-3, 2e-3]);
    const s = spec(read);
    assert.equal(s.calibration!.table!.perSequencePasses, true);
    assert.equal(
      mixedStepMs(s, twoChunks),
      tableStepMs({ ...RISING, perSequencePasses: true }, twoChunks),
    );
    // One pass per sequence charges each chunk alone: more than one pass of their total here.
    assert.ok(mixedStepMs(s, twoChunks) > tableStepMs(RISING, twoChunks));
  });

  test('an older table (one rate, one pass) times as before', () => {
    const s = spec(profileFromData(JSON.parse(JSON.stringify(profile({ ...FLAT })))));
    assert.equal(s.calibration!.table!.perSequencePasses, undefined);
    assert.equal(s.calibration!.table!.pairRateContextTokens, undefined);
    assert.equal(mixedStepMs(s, twoChunks), tableStepMs(FLAT, twoChunks));
  });

  test('rates of another length than their contexts: a ProfileError naming the fields', () => {
    const data = JSON.parse(JSON.stringify(profile({ ...RISING, msPerContextPairAt: [1e-3] })));
    assert.throws(
      () => profileFromData(data),
      (err: unknown) =>
        err instanceof ProfileError &&
        /pairRateContextTokens and msPerContextPairAt must be lists of the same length/.test(
          err.message,
        ),
    );
  });
});
