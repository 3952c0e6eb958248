/**
 * `kvroute calibrate --url --step-table` against a simulated `kvroute engine` (in process): the
 * mixed-step probes run, the profile carries a table whose knots are the measured step sizes,
 * and `kvroute sim --profile` reads it. Nothing here asserts a time.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { medianOf, mixedProbes, prefillSteps, warmProbes } from '../../src/calibrate/live.ts';
import { readProfile } from '../../src/calibrate/profileFile.ts';
import { startEngineServer } from '../../src/engine/server/server.ts';
import {
  decodeCostTokensOf,
  fitStepTable,
  makeReplicaSpec,
  mixedStepMs,
  type StepTable,
  type TableObservation,
  tableStepMs,
} from '../../src/model/index.ts';

const ROOT = new URL('../..', import.meta.url).pathname;

function runCliAsync(
  args: string[],
  timeoutMs: number,
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [join(ROOT, 'bin/kvroute.js'), ...args], { cwd: ROOT });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill(), timeoutMs);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, stdout, stderr });
    });
  });
}

test('mixed probes: a chunk the prefill probes also time alone, under the budget', () => {
  assert.deepEqual(mixedProbes(512, 2048), [
    { kind: 'mixed', chunkTokens: 256, contextTokens: 64 },
    { kind: 'mixed', chunkTokens: 256, contextTokens: 1024 },
  ]);
  assert.deepEqual(
    mixedProbes(2048, 512).map((p) => p.kind === 'mixed' && p.chunkTokens),
    [512, 512],
  );
});

test('--step-table is for --url', async () => {
  const r = await runCliAsync(
    [
      'calibrate',
      '--vidur-profile',
      join(ROOT, 'test/fixtures/vidur/h100/meta-llama/Llama-2-70b-hf'),
      '--step-table',
    ],
    300_000,
  );
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /--step-table is for --url/);
});

test('warm probes: one chunk after a cached prefix of about a quarter, half and all the rest of the longest prompt', () => {
  assert.deepEqual(warmProbes(256, 1024), [
    { kind: 'warm', chunkTokens: 256, contextTokens: 192 },
    { kind: 'warm', chunkTokens: 256, contextTokens: 384 },
    { kind: 'warm', chunkTokens: 256, contextTokens: 768 },
  ]);
  assert.deepEqual(warmProbes(2048, 1024), [
    { kind: 'warm', chunkTokens: 512, contextTokens: 128 },
    { kind: 'warm', chunkTokens: 512, contextTokens: 256 },
    { kind: 'warm', chunkTokens: 512, contextTokens: 512 },
  ]);
  // Its steps: the uncached tail in chunks, each reading the cached prefix and the chunks before.
  assert.deepEqual(prefillSteps(300, 256, 1024), [
    { prefillTokens: 256, decodeTokens: 0, kvTokensRead: 1024 },
    { prefillTokens: 44, decodeTokens: 0, kvTokensRead: 1280 },
  ]);
  assert.deepEqual(prefillSteps(300, 256), prefillSteps(300, 256, 0));
});

test("a one-token prompt's point is a knot: a short chunk that ends a prompt pays its fixed cost", () => {
  // TTFTs of isolated prompts (each one step, its last), the request overhead held at 2 ms.
  const ttft = (tokens: number, ms: number): TableObservation => ({
    label: `p${tokens}`,
    steps: [{ prefillTokens: tokens, decodeTokens: 0, kvTokensRead: 0 }],
    perRequest: true,
    measuredMs: ms,
  });
  const decode = (seqs: number, ms: number): TableObservation => ({
    label: `d${seqs}`,
    steps: [{ prefillTokens: 0, decodeTokens: seqs, kvTokensRead: 0 }],
    perRequest: false,
    measuredMs: ms,
  });
  const observations = [ttft(64, 24), ttft(128, 28), decode(1, 18), decode(4, 30)];
  const without = fitStepTable(observations, { requestOverheadMs: 2 }).table;
  const withOne = fitStepTable([ttft(1, 20), ...observations], { requestOverheadMs: 2 }).table;
  const chunk6 = { prefillTokens: 6, decodeTokens: 0, kvTokensRead: 0 };
  // Without it: 6/64 of the 64-token knot (22 ms), from P(0) = 0.
  assert.ok(Math.abs(tableStepMs(without, chunk6) - (6 / 64) * 22) < 1e-6);
  // With it: the knots at 1 and 64 are 18 and 22 ms; 6 tokens are 5/63 of the way.
  assert.deepEqual(withOne.prefillTokens, [1, 64, 128]);
  assert.ok(Math.abs(tableStepMs(withOne, chunk6) - (18 + (5 / 63) * 4)) < 1e-6);
  // A chunk at or past the first real knot is charged as before.
  const chunk128 = { prefillTokens: 128, decodeTokens: 0, kvTokensRead: 0 };
  assert.ok(Math.abs(tableStepMs(withOne, chunk128) - 26) < 1e-6);
});

test('a point is the median of its repeats (the lower middle one of an even count)', () => {
  assert.equal(medianOf([5, 1, 9]), 5);
  assert.equal(medianOf([400, 100, 300, 200]), 200);
  assert.equal(medianOf([7]), 7);
});

test('decodeCostTokensOf: a decode per sequence over a full chunk per token', () => {
  const t: StepTable = {
    prefillTokens: [128, 256],
    prefillMs: [60, 100],
    decodeSeqs: [1, 4],
    decodeMs: [30, 100],
    msPerContextPair: 1e-6,
    overheadMs: 7,
  };
  // 100 ms / 4 sequences = 25 ms a decode; 100 ms / 256 tokens a prompt token: 64 tokens.
  assert.equal(decodeCostTokensOf(t, 256), 64);
  assert.equal(decodeCostTokensOf({ ...t, decodeSeqs: [], decodeMs: [] }, 256), 0);
});

test('kvroute calibrate --url --step-table: a table of the measured sizes that sim reads', async () => {
  const server = await startEngineServer({
    host: '127.0.0.1',
    port: 0,
    speedup: 5,
    budgetTokens: 512,
  });
  const tmp = mkdtempSync(join(tmpdir(), 'kvroute-table-live-'));
  try {
    const out = join(tmp, 'table.yaml');
    const r = await runCliAsync(
      [
        'calibrate',
        '--url',
        server.url,
        '--speedup',
        '5',
        '--budget',
        '512',
        // The probes are finite (4 sizes, batches 1 and 4, 2 repeats): the run ends when they
        // are done, and the time budget only has to outlast a busy host (40 s did not).
        '--budget-s',
        '240',
        '--max-batch',
        '4',
        '--max-prompt-tokens',
        '1024',
        '--repeats',
        '2',
        '--step-table',
        '--out',
        out,
      ],
      300_000,
    );
    assert.equal(r.status, 0, r.stderr);
    // A concurrent probe (a batched decode, a decode beside a chunk) whose streams a busy host
    // did not keep together is run again, and after its retries skipped with the reason on
    // stderr (src/calibrate/live.ts, isBusyHostResult): then it is no knot. Every other probe is.
    const busySkipped = (label: RegExp) =>
      new RegExp(
        `^calibrate: skipped ${label.source}: (only \\d+ decode gaps with all \\d+ streams running|the tokens came in bursts|no prompt arrived while the stream decoded)`,
        'm',
      ).test(r.stderr);
    const mixedSkipped = [64, 1024].filter((at) =>
      busySkipped(new RegExp(`mixed 256-token chunk \\+ 1 decode at ${at} tokens`)),
    );
    if (mixedSkipped.includes(64)) {
      assert.doesNotMatch(
        r.stderr,
        /^calibrate: mixed 256-token chunk \+ 1 decode at 64 tokens: \d+\.\d ms$/m,
      );
    } else {
      assert.match(
        r.stderr,
        /^calibrate: mixed 256-token chunk \+ 1 decode at 64 tokens: \d+\.\d ms$/m,
      );
    }
    assert.match(r.stdout, /^ {2}step table \(times every step in place of the curve\)/m);
    const profile = readProfile(out);
    const curve = profile.curves[0]!;
    const table = curve.table!;
    assert.ok(table, 'the profile has a table');
    // Prompts of 64..1,024 tokens run as chunks of at most the budget, and the one-token prompt
    // (a short chunk's fixed cost); decodes at batch 1 and 4.
    assert.deepEqual(table.prefillTokens, [1, 64, 128, 256, 512]);
    assert.ok(curve.points.some((p) => p.label.startsWith('prompt 1 tokens (1 step)')));
    // Decode batches 1 and 4, each at a few contexts: a batch is a knot when one of its probes
    // was measured (1 also when a mixed step was: its one decode), and a batch none of whose
    // probes was measured had them skipped for a busy host, said on stderr.
    const decodePoint = (batch: number) =>
      curve.points.some((p) => p.label.startsWith(`decode batch ${batch}, `));
    for (const batch of [1, 4].filter((b) => !decodePoint(b))) {
      assert.ok(busySkipped(new RegExp(`decode batch ${batch} x \\d+ tokens`)), r.stderr);
    }
    const mixedPoint = curve.points.some((p) => p.label.startsWith('mixed step: '));
    assert.deepEqual(
      table.decodeSeqs,
      [1, 4].filter((b) => decodePoint(b) || (b === 1 && mixedPoint)),
    );
    assert.ok(table.decodeSeqs.length > 0, r.stderr);
    assert.equal(
      curve.points.some((p) => p.label.startsWith('mixed step: 256-token chunk')),
      mixedSkipped.length < 2,
    );
    // The warm probes: a 512-token chunk after the engine's cached prefix of 128, 256 and 512
    // tokens, and the pair rate at each of those contexts in the table.
    for (const cached of [128, 256, 512]) {
      assert.ok(
        curve.points.some((p) => p.label.startsWith(`prompt 512 tokens after ${cached} cached`)),
        `a warm point after ${cached} cached tokens`,
      );
    }
    assert.equal(
      curve.points.filter((p) => p.label.startsWith('prompt 512 tokens (1 step) between those'))
        .length,
      3,
      'the cold chunk timed beside each warm probe',
    );
    assert.deepEqual(table.pairRateContextTokens, [128, 256, 512]);
    assert.equal(table.msPerContextPairAt!.length, 3);
    assert.match(r.stdout, /a decode costs \d+\.\d prompt tokens of step time/);
    assert.match(profile.method, /a step table/);
    // The calibrated spec times steps from the table.
    const spec = makeReplicaSpec({ profile });
    const work = { prefillTokens: 300, decodeTokens: 2, kvTokensRead: 900 };
    assert.equal(mixedStepMs(spec, work), tableStepMs(table, work));
    const sim = await runCliAsync(
      ['sim', '--duration', '5', '--replicas', '1', '--rate', '2', '--profile', out, '--json'],
      300_000,
    );
    assert.equal(sim.status, 0, sim.stderr);
    assert.ok(JSON.parse(sim.stdout).results[0].completed > 0);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
    await server.close();
  }
});
