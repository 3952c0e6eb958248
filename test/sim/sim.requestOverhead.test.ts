/**
 * A calibrated request overhead in the simulator: a profile's fitted per-request time (the
 * table's, else the curve's) reaches the replica spec, the fleet hands each request to its
 * engine that long after routing it, its TTFT counts from the arrival, the idle TTFT the
 * slowdown SLO divides by includes it, and a replica killed during the hand-off re-routes the
 * request. Expected times are the table's own arithmetic, worked by hand.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { readProfile, writeProfile } from '../../src/calibrate/profileFile.ts';
import { parseSimFlags } from '../../src/cli/sim.ts';
import { idlePrefillMs } from '../../src/engine/idlePrefill.ts';
import { makeEngineConfig } from '../../src/engine/options.ts';
import { calibrationFor } from '../../src/model/index.ts';
import type { FleetRequestRecord } from '../../src/sim/fleet.ts';
import { simulate } from '../../src/sim/run.ts';
import { tableProfile } from '../support/tableProfile.ts';

/** 256-token chunks at 50 ms, decodes at 10 ms, no context cost: TTFTs are sums of knots. */
const TABLE = {
  prefillTokens: [256],
  prefillMs: [50],
  decodeSeqs: [1, 4],
  decodeMs: [10, 10],
  msPerContextPair: 0,
  overheadMs: 0,
};

const tmp = mkdtempSync(join(tmpdir(), 'kvroute-request-overhead-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

function profileFile(
  name: string,
  requestOverheadMs: number,
  requestMsPerPromptToken?: number,
): string {
  const path = join(tmp, `${name}.yaml`);
  writeProfile(
    path,
    tableProfile({
      ...TABLE,
      requestOverheadMs,
      ...(requestMsPerPromptToken !== undefined && { requestMsPerPromptToken }),
    }),
  );
  return path;
}

/** Requests of 512 tokens (two chunks), 2 output tokens, at the given arrival times. */
function traceFile(name: string, arrivalsMs: number[]): string {
  const path = join(tmp, `${name}.jsonl`);
  const lines = arrivalsMs.map((t, i) =>
    JSON.stringify({
      timestamp: t,
      input_length: 512,
      output_length: 2,
      // Distinct prompts: no request caches another's blocks.
      hash_ids: Array.from({ length: 2 }, (_, b) => 1000 * (i + 1) + b),
    }),
  );
  writeFileSync(path, `${lines.join('\n')}\n`);
  return path;
}

function run(trace: string, profile: string, extra: string[] = []): FleetRequestRecord[] {
  const parsed = parseSimFlags([
    ...['--trace', trace, '--profile', profile, '--model', 'llama-3.1-8b', '--tp', '1'],
    ...['--gpu', 'h200', '--budget', '256', '--replicas', '2', '--warmup', '0'],
    ...['--policy', 'round-robin', '--quiet'],
    ...extra,
  ]);
  assert.ok(parsed !== 'help');
  const records: FleetRequestRecord[] = [];
  simulate({ ...parsed.base, onRequest: (r) => records.push(r) });
  return records.sort((a, b) => a.id - b.id);
}

describe('the profile carries it', () => {
  test("the table's overhead, else the curve's; none where it is not positive", () => {
    const withTable = tableProfile(
      { ...TABLE, requestOverheadMs: 12 },
      {
        curve: { requestOverheadMs: 30 },
      },
    );
    assert.equal(calibrationFor(withTable, 1).requestOverheadMs, 12);
    const curveOnly = tableProfile(TABLE, { curve: { requestOverheadMs: 30 } });
    delete (curveOnly.curves[0] as { table?: unknown }).table;
    assert.equal(calibrationFor(curveOnly, 1).requestOverheadMs, 30);
    for (const ms of [0, -4]) {
      const c = calibrationFor(tableProfile({ ...TABLE, requestOverheadMs: ms }), 1);
      assert.equal('requestOverheadMs' in c, false, `${ms}`);
    }
  });
});

describe('the simulator', () => {
  test('each TTFT is the overhead plus its steps, counted from the arrival', () => {
    // Two replicas, round-robin, arrivals 1 s apart: every request finds its replica idle.
    const trace = traceFile('apart', [0, 1000, 2000, 3000]);
    const without = run(trace, profileFile('none', 0));
    const withIt = run(trace, profileFile('twelve', 12));
    // Two 256-token chunks of 50 ms each: 100 ms to the first token, 112 with the overhead.
    assert.deepEqual(
      without.map((r) => r.ttftMs),
      [100, 100, 100, 100],
    );
    assert.deepEqual(
      withIt.map((r) => r.ttftMs),
      [112, 112, 112, 112],
    );
    // The decode after it: the end moves by the overhead too.
    assert.deepEqual(
      withIt.map((r, i) => r.endMs! - without[i]!.endMs!),
      [12, 12, 12, 12],
    );
  });

  test("a text prompt's tokenization: each prompt token adds the profile's ms per token", () => {
    const trace = traceFile('text', [0, 1000, 2000, 3000]);
    // 12 ms + 512 tokens x 0.01 ms = 17.12 ms before the two 50 ms chunks.
    const r = run(trace, profileFile('text', 12, 0.01));
    for (const x of r) assert.ok(Math.abs(x.ttftMs! - 117.12) < 1e-9, `${x.ttftMs}`);
    const path = profileFile('text-idle', 12, 0.01);
    const parsed = parseSimFlags(['--profile', path, '--model', 'llama-3.1-8b', '--tp', '1']);
    assert.ok(parsed !== 'help');
    const config = makeEngineConfig({ ...parsed.base.engine, budgetTokens: 256 });
    assert.ok(Math.abs(idlePrefillMs(config, 256) - (12 + 2.56 + 50)) < 1e-9);
    // Carried by calibrationFor; a negative value in the file is refused naming the field.
    const c = calibrationFor(tableProfile({ ...TABLE, requestMsPerPromptToken: 0.01 }), 1);
    assert.equal(c.requestMsPerPromptToken, 0.01);
    const bad = join(tmp, 'bad.yaml');
    writeProfile(bad, tableProfile({ ...TABLE, requestMsPerPromptToken: -1 }));
    assert.throws(() => readProfile(bad), {
      message: /table\.requestMsPerPromptToken must be a number >= 0, got -1/,
    });
  });

  test('requests arriving together are handed off together: the schedule shifts by the overhead', () => {
    // One replica, three prompts at once: they queue in the scheduler, not in the hand-off.
    const trace = traceFile('together', [0, 0, 0]);
    const one = ['--replicas', '1'];
    const without = run(trace, profileFile('none', 0), one);
    const withIt = run(trace, profileFile('twenty', 20), one);
    assert.deepEqual(
      withIt.map((r) => r.replica),
      [0, 0, 0],
    );
    assert.equal(without[0]!.ttftMs, 100);
    assert.ok(without[2]!.ttftMs! > 200, 'the third waits for the others');
    assert.deepEqual(
      withIt.map((r, i) => r.ttftMs! - without[i]!.ttftMs!),
      [20, 20, 20],
    );
  });

  test('the idle TTFT of the slowdown SLO includes it', () => {
    const path = profileFile('idle', 12);
    const parsed = parseSimFlags([
      '--profile',
      path,
      '--model',
      'llama-3.1-8b',
      '--tp',
      '1',
      '--budget',
      '256',
    ]);
    assert.ok(parsed !== 'help');
    const config = makeEngineConfig(parsed.base.engine);
    assert.equal(idlePrefillMs(config, 512), 112);
    assert.equal(idlePrefillMs(config, 256), 62);
  });

  test('a replica killed during the hand-off: the request is re-routed, not lost', () => {
    const trace = traceFile('kill', [0, 1000]);
    const first = run(trace, profileFile('kill', 20))[0]!.replica as number;
    // Routed at 0 ms, to be handed off at 20: the kill at 10 ms strands it.
    const r = run(trace, profileFile('kill', 20), ['--kill', `${first}@0.01`]);
    assert.equal(r.length, 2);
    assert.equal(r[0]!.error, undefined);
    assert.equal(r[0]!.replica, 1 - first);
    // Re-routed at 10 ms, handed off at 30, two chunks of 50 ms: 130 ms from the arrival.
    assert.equal(r[0]!.ttftMs, 130);
  });
});
