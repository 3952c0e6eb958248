/**
 * The step table's sampling chunk: a prompt chunk that ends its prompt computes its last token's
 * logits and samples (as a decode does), where a chunk inside a prompt does not. Marked on
 * calibrate's observations, fitted apart from the knots and the request overhead, carried by a
 * profile, and charged by the simulated engine to the chunk that ends a prompt only.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { writeProfile } from '../../src/calibrate/profileFile.ts';
import { readEngineOptions } from '../../src/cli/engine.ts';
import { ENGINE_FLAGS } from '../../src/cli/engineFlags.ts';
import { readFlags } from '../../src/cli/args.ts';
import { EngineCore } from '../../src/engine/core.ts';
import { resolveEngineOptions } from '../../src/engine/server/options.ts';
import {
  type CostProfile,
  fitStepTable,
  markPromptSamples,
  ProfileError,
  profileFromData,
  type StepTable,
  type TableObservation,
  tableStepMs,
} from '../../src/model/index.ts';
import { tableProfile } from '../support/tableProfile.ts';

const TABLE: StepTable = {
  prefillTokens: [64, 128, 256],
  prefillMs: [15, 25, 45],
  decodeSeqs: [1, 4],
  decodeMs: [25, 40],
  msPerContextPair: 1e-4,
  overheadMs: 0,
  msPerPromptSample: 20,
};
const P = (prefillTokens: number, decodeTokens: number, kvTokensRead: number) => ({
  prefillTokens,
  decodeTokens,
  kvTokensRead,
});
const ttft = (label: string, steps: TableObservation['steps']): TableObservation => ({
  label,
  steps,
  perRequest: true,
  measuredMs: 0,
});
const gap = (label: string, steps: TableObservation['steps']): TableObservation => ({
  label,
  steps,
  perRequest: false,
  measuredMs: 0,
});
/** calibrate's observation shapes: prompts of 1 to 4 chunks, warm chunks, mixed and decode steps. */
const SHAPES: TableObservation[] = [
  ttft('64', [P(64, 0, 0)]),
  ttft('128', [P(128, 0, 0)]),
  ttft('256', [P(256, 0, 0)]),
  ttft('512', [P(256, 0, 0), P(256, 0, 256)]),
  ttft('1024', [P(256, 0, 0), P(256, 0, 256), P(256, 0, 512), P(256, 0, 768)]),
  ttft('warm', [P(256, 0, 1280)]),
  gap('mixed', [P(128, 1, 70)]),
  gap('decode 1', [P(0, 1, 300)]),
  gap('decode 4', [P(0, 4, 1200)]),
];

describe('marking and charging', () => {
  test("a time to first token's last prompt chunk samples; a mixed step's chunk too; decodes not", () => {
    const marked = markPromptSamples(SHAPES);
    assert.deepEqual(
      marked.map((o) => o.steps.map((s) => s.promptSamples ?? 0)),
      [[1], [1], [1], [0, 1], [0, 0, 0, 1], [1], [1], [0], [0]],
    );
    // The input is left as it was.
    assert.equal(SHAPES[3]!.steps[1]!.promptSamples, undefined);
  });

  test('the table adds the sample cost per sampling chunk; absent, nothing', () => {
    const work = { ...P(256, 0, 0), promptSamples: 2 };
    assert.equal(tableStepMs(TABLE, work), tableStepMs(TABLE, P(256, 0, 0)) + 40);
    const { msPerPromptSample: _, ...older } = TABLE;
    assert.equal(tableStepMs(older, work), tableStepMs(older, P(256, 0, 0)));
  });
});

describe('the fit', () => {
  const measured = markPromptSamples(SHAPES).map((o) => ({
    ...o,
    measuredMs: (o.perRequest ? 12 : 0) + o.steps.reduce((s, w) => s + tableStepMs(TABLE, w), 0),
  }));

  test('recovers the sample cost apart from the knots and the request overhead', () => {
    const fit = fitStepTable(measured, { msPerContextPair: 1e-4, promptSamples: true });
    assert.ok(Math.abs(fit.table.msPerPromptSample! - 20) < 1e-6, `${fit.table.msPerPromptSample}`);
    assert.ok(Math.abs(fit.requestOverheadMs - 12) < 1e-6, `${fit.requestOverheadMs}`);
    assert.ok(fit.maxErrorPct < 1e-6);
  });

  test('not asked: the table has no sample cost, as before', () => {
    const fit = fitStepTable(measured, { msPerContextPair: 1e-4 });
    assert.equal(fit.table.msPerPromptSample, undefined);
  });
});

describe('through a profile into the simulated engine', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'kvroute-prompt-sample-'));
  after(() => rmSync(tmp, { recursive: true, force: true }));
  const profile = (table: Record<string, unknown>): CostProfile =>
    tableProfile(table, { gpu: 'h100-sxm', curve: { mfuMax: 0.5, mbu: 0.5 } });
  /** Step durations of one 600-token prompt (chunks of 256, 256, 88) on an engine with the profile. */
  const durations = (table: Record<string, unknown>): number[] => {
    const path = join(tmp, `p${Math.random().toString(36).slice(2)}.yaml`);
    writeProfile(path, profile(table));
    const flags = readFlags(
      ['--profile', path, '--model', 'llama-3.1-8b', '--tp', '1', '--budget', '256'],
      ENGINE_FLAGS,
    );
    const config = resolveEngineOptions(readEngineOptions(flags as never)).engineConfig;
    const core = new EngineCore(config);
    core.add({
      id: 'a',
      promptTokens: Array.from({ length: 600 }, (_, i) => i),
      maxNewTokens: 2,
      arrivalMs: 0,
    });
    const out: number[] = [];
    for (let i = 0; i < 10 && core.hasWork(); i++) out.push(core.step().durationMs);
    return out;
  };

  test('only the chunk that ends the prompt pays it', () => {
    const withSample = durations({ ...TABLE });
    const { msPerPromptSample: _, ...older } = TABLE;
    const without = durations(older);
    assert.equal(withSample.length, without.length);
    const extra = withSample.map((ms, i) => ms - without[i]!);
    // Chunks 256, 256, 88 (the last samples), then the decode.
    assert.equal(extra.length, 4);
    assert.ok(
      Math.abs(extra[0]!) < 1e-9 && Math.abs(extra[1]!) < 1e-9 && Math.abs(extra[3]!) < 1e-9,
    );
    assert.ok(Math.abs(extra[2]! - 20) < 1e-9, `${extra}`);
  });

  test('a negative sample cost: a ProfileError naming the field', () => {
    const data = JSON.parse(JSON.stringify(profile({ ...TABLE, msPerPromptSample: -1 })));
    assert.throws(
      () => profileFromData(data),
      (err: unknown) =>
        err instanceof ProfileError && /msPerPromptSample must be a number >= 0/.test(err.message),
    );
  });
});
