/**
 * Attention in whole query tiles (llama.cpp's CPU flash-attention kernel: 64 rows, a partial tile
 * at a whole one's cost, a per-row path under one tile): the table's charge, its reading from
 * paired probes, the probes calibrate plans, and a profile carrying the two fields to the cost
 * model. The numbers are the tiny model's, measured with one thread (a chunk's context cost in ms
 * after 1,024 tokens: 64 -> 14.0, 65 -> 23.3, 128 -> 24.4, 129 -> 38.3, 192 -> 38.9, 193 -> 44.6).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { tileProbes } from '../../src/calibrate/live.ts';
import { ROW_TILE, rowTiling, type TilePair } from '../../src/calibrate/rowTile.ts';
import {
  attentionRows,
  type CostProfile,
  contextPairMs,
  contextPairs,
  fitStepTable,
  makeReplicaSpec,
  mixedStepMs,
  ProfileError,
  profileFromData,
  type StepTable,
  tableStepMs,
} from '../../src/model/index.ts';
import { tableProfile } from '../support/tableProfile.ts';

const FLAT: StepTable = {
  prefillTokens: [64, 256],
  prefillMs: [12, 45],
  decodeSeqs: [1, 4],
  decodeMs: [20, 60],
  msPerContextPair: 2e-4,
  overheadMs: 1,
};
const TILED: StepTable = { ...FLAT, attentionRowTile: 64, shortChunkPairFactor: 3.5 };

describe('the rows a chunk is charged for', () => {
  test('whole tiles from one tile up, the factor under it, the tokens without tiling', () => {
    assert.deepEqual(
      [64, 65, 128, 129, 192, 193, 256].map((n) => attentionRows(TILED, n)),
      [64, 128, 128, 192, 192, 256, 256],
    );
    assert.equal(attentionRows(TILED, 32), 32 * 3.5);
    assert.equal(attentionRows({ attentionRowTile: 64 }, 32), 32);
    assert.deepEqual(
      [1, 32, 65, 129].map((n) => attentionRows(FLAT, n)),
      [1, 32, 65, 129],
    );
    assert.equal(attentionRows(TILED, 0), 0);
  });

  test("a chunk's context pairs and their ms follow the rows; decodes and cold chunks do not", () => {
    const step = {
      prefillTokens: 132 + 40,
      decodeTokens: 1,
      kvTokensRead: 0,
      entries: [
        { kind: 'prefill' as const, tokens: 132, contextTokens: 1024 },
        { kind: 'prefill' as const, tokens: 40, contextTokens: 0 },
        { kind: 'decode' as const, tokens: 1, contextTokens: 500 },
      ],
    };
    // 132 tokens -> 192 rows x 1,024; the cold chunk reads no context; the decode 501.
    assert.equal(contextPairs(step, TILED), 192 * 1024 + 501);
    assert.equal(contextPairs(step), 132 * 1024 + 501);
    assert.ok(Math.abs(contextPairMs(TILED, step) - (192 * 1024 + 501) * 2e-4) < 1e-9);
    assert.ok(
      Math.abs(tableStepMs(TILED, step) - tableStepMs(FLAT, step) - 60 * 1024 * 2e-4) < 1e-9,
    );
    // Without entries (calibrate's prompt-only steps): the chunk's rows x the KV read.
    assert.equal(
      contextPairs({ prefillTokens: 65, decodeTokens: 0, kvTokensRead: 768 }, TILED),
      128 * 768,
    );
  });

  test('by property: never fewer rows than tokens, at most one partial tile more from a tile up', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8192 }),
        fc.integer({ min: 1, max: 256 }),
        (n, tile) => {
          const rows = attentionRows({ attentionRowTile: tile }, n);
          assert.ok(rows >= n);
          if (n >= tile) {
            assert.ok(rows < n + tile);
            assert.equal(rows % tile, 0);
          }
        },
      ),
    );
  });
});

/** Pairs as a probe of an engine with `rows(n)` query rows at `rate` ms per pair would give. */
function pairsOf(rows: (n: number) => number, rate: number, noise: number[] = [0]): TilePair[] {
  const context = 768;
  const out: TilePair[] = [];
  for (const chunkTokens of [ROW_TILE + 1, ROW_TILE / 2]) {
    noise.forEach((e, i) => {
      const coldMs = 10 + chunkTokens * 0.2 + i;
      out.push({
        chunkTokens,
        contextTokens: context,
        coldMs,
        warmMs: coldMs + rows(chunkTokens) * context * rate * (1 + e),
      });
    });
  }
  return out;
}

describe('reading the tiling from paired probes', () => {
  const tiled = (factor: number) => (n: number) => (n < 64 ? n * factor : Math.ceil(n / 64) * 64);

  test("a tiled engine: tile 64 and the short chunk's factor", () => {
    const got = rowTiling(pairsOf(tiled(3.7), 2e-4), () => 2e-4);
    assert.equal(got.attentionRowTile, 64);
    assert.ok(Math.abs(got.shortChunkPairFactor! - 3.7) < 1e-9);
  });

  test('an engine without tiles (rows = tokens): no fields; a short path no slower: factor 1', () => {
    assert.deepEqual(
      rowTiling(
        pairsOf((n) => n, 2e-4),
        () => 2e-4,
      ),
      {},
    );
    assert.equal(rowTiling(pairsOf(tiled(0.8), 2e-4), () => 2e-4).shortChunkPairFactor, 1);
  });

  test('a probe missing, or no pair rate: no fields', () => {
    const pairs = pairsOf(tiled(3), 2e-4).filter((p) => p.chunkTokens !== 32);
    assert.deepEqual(
      rowTiling(pairs, () => 2e-4),
      {},
    );
    assert.deepEqual(
      rowTiling(pairsOf(tiled(3), 2e-4), () => 0),
      {},
    );
  });

  test('by property: noise of up to 20 % on each pair does not change the verdict', () => {
    fc.assert(
      fc.property(
        fc.boolean(),
        fc.double({ min: 1.2, max: 6, noNaN: true }),
        fc.double({ min: 1e-5, max: 1e-2, noNaN: true }),
        fc.array(fc.double({ min: -0.2, max: 0.2, noNaN: true }), { minLength: 1, maxLength: 9 }),
        (isTiled, factor, rate, noise) => {
          const got = rowTiling(
            pairsOf(isTiled ? tiled(factor) : (n) => n, rate, noise),
            () => rate,
          );
          if (!isTiled) return assert.deepEqual(got, {});
          assert.equal(got.attentionRowTile, 64);
          assert.ok(Math.abs(got.shortChunkPairFactor! / factor - 1) <= 0.2 + 1e-9);
        },
      ),
    );
  });
});

describe('the probes and the fit', () => {
  test("after the longest warm probe's context, within the budget and the longest prompt", () => {
    assert.deepEqual(tileProbes(256, 1024), [
      { kind: 'tile', chunkTokens: 65, contextTokens: 768 },
      { kind: 'tile', chunkTokens: 32, contextTokens: 768 },
    ]);
    assert.deepEqual(
      tileProbes(48, 1024).map((p) => (p.kind === 'tile' ? p.chunkTokens : 0)),
      [32],
    );
  });

  test('the fit holds the tiling it is given and charges the odd chunks by it', () => {
    const obs = [64, 128, 256].flatMap((n) => [
      {
        label: `cold ${n}`,
        perRequest: true,
        measuredMs: 3 + tableStepMs(TILED, { prefillTokens: n, decodeTokens: 0, kvTokensRead: 0 }),
        steps: [{ prefillTokens: n, decodeTokens: 0, kvTokensRead: 0 }],
      },
    ]);
    const warm = { prefillTokens: 65, decodeTokens: 0, kvTokensRead: 768 };
    obs.push({
      label: 'warm 65',
      perRequest: true,
      measuredMs: 3 + tableStepMs(TILED, warm),
      steps: [warm],
    });
    const fit = fitStepTable(obs, {
      msPerContextPair: 2e-4,
      tiling: { attentionRowTile: 64, shortChunkPairFactor: 3.5 },
    });
    assert.equal(fit.table.attentionRowTile, 64);
    assert.equal(fit.table.shortChunkPairFactor, 3.5);
    assert.ok(fit.maxErrorPct < 1, `max error ${fit.maxErrorPct} %`);
  });
});

describe('a profile carries the tiling to the cost model', () => {
  const profile = (table: Record<string, unknown>): CostProfile =>
    profileFromData(JSON.parse(JSON.stringify(tableProfile(table))));
  const spec = (p: CostProfile) =>
    makeReplicaSpec({ model: 'llama-3.1-8b', tp: 1, weightsDtype: 'bf16', profile: p });
  const step = {
    prefillTokens: 132,
    decodeTokens: 0,
    kvTokensRead: 0,
    entries: [{ kind: 'prefill' as const, tokens: 132, contextTokens: 1024 }],
  };

  test('sim and engine time a step with the fields; a table without them as before', () => {
    assert.equal(mixedStepMs(spec(profile({ ...TILED })), step), tableStepMs(TILED, step));
    assert.equal(mixedStepMs(spec(profile({ ...FLAT })), step), tableStepMs(FLAT, step));
    assert.ok(tableStepMs(TILED, step) > tableStepMs(FLAT, step));
  });

  test('bad values: a ProfileError naming the field', () => {
    for (const [field, value, message] of [
      ['attentionRowTile', 0, /attentionRowTile must be an integer >= 1/],
      ['attentionRowTile', 6.5, /attentionRowTile must be an integer >= 1/],
      ['shortChunkPairFactor', -1, /shortChunkPairFactor must be a number > 0/],
      ['shortChunkPairFactor', 'fast', /shortChunkPairFactor must be a number > 0/],
    ] as const) {
      assert.throws(
        () => profile({ ...FLAT, [field]: value }),
        (err: unknown) => err instanceof ProfileError && message.test(err.message),
        `${field}: ${value}`,
      );
    }
  });
});
