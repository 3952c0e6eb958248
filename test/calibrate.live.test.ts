/**
 * Live calibration against a real `kvroute engine` (in process, on 127.0.0.1), whose cost model
 * is known: the fitted profile must give back its prefill µs/token and its decode step within
 * 3 % at every measured point. The engine runs at --speedup 2, so the measurements take about
 * fifteen seconds of wall time.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { liveProfile, measureLive, planProbes, prefillSteps } from '../src/calibrate/live.ts';
import { readProfile } from '../src/calibrate/profileFile.ts';
import { startEngineServer } from '../src/engine/server/server.ts';
import { makeReplicaSpec, mixedStepMs, prefillUsPerToken } from '../src/model/index.ts';

const ROOT = new URL('..', import.meta.url).pathname;

describe('the probe plan', () => {
  test('prefill lengths double up to the longest prompt; decodes fit the KV cap', () => {
    const probes = planProbes(2048, 8192, 16);
    const prefill = probes.flatMap((p) => (p.kind === 'prefill' ? [p.promptTokens] : []));
    assert.deepEqual(prefill, [64, 128, 256, 512, 1024, 2048, 4096, 8192]);
    const decode = probes.filter((p) => p.kind === 'decode');
    assert.equal(decode.length, 9);
    assert.ok(
      decode.every(
        (p) => p.kind === 'decode' && p.batch * (p.contextTokens + p.outputTokens) <= 262_144,
      ),
    );
    assert.equal(planProbes(2048, 8192, 64).filter((p) => p.kind === 'decode').length, 11);
  });

  test('a prompt longer than the budget runs as chunks that read the KV before them', () => {
    assert.deepEqual(prefillSteps(5000, 2048), [
      { prefillTokens: 2048, decodeTokens: 0, kvTokensRead: 0 },
      { prefillTokens: 2048, decodeTokens: 0, kvTokensRead: 2048 },
      { prefillTokens: 904, decodeTokens: 0, kvTokensRead: 4096 },
    ]);
  });
});

/**
 * One calibration of a fresh engine; the problems found (empty when every measured point is
 * within 3 % of the engine's own cost model).
 */
async function calibrateOnce(): Promise<string[]> {
  const speedup = 2;
  const server = await startEngineServer({ host: '127.0.0.1', port: 0, speedup });
  try {
    const o = {
      url: server.url,
      model: null,
      apiKey: null,
      budgetTokens: 2048,
      speedup,
      budgetS: 120,
      maxBatch: 16,
    };
    const m = await measureLive(o);
    assert.equal(m.model, 'llama-3.3-70b');
    const problems = m.skipped.map((s) => `skipped ${s}`);
    const truth = makeReplicaSpec();
    const profile = liveProfile(m, truth, o);
    const calibrated = makeReplicaSpec({ profile });
    const check = (got: number, want: number, what: string) => {
      if (!(Math.abs(got / want - 1) < 0.03)) {
        problems.push(`${what}: calibrated ${got.toFixed(3)} vs engine ${want.toFixed(3)}`);
      }
    };
    const ttfts = m.observations.filter((x) => x.kind === 'ttft');
    const itls = m.observations.filter((x) => x.kind === 'itl');
    if (ttfts.length !== 8 || itls.length !== 9) {
      problems.push(`measured ${ttfts.length} prompt lengths and ${itls.length} decode points`);
    }
    for (const x of ttfts) {
      const stepTokens = x.steps[0]!.prefillTokens;
      const engineUs = (mixedStepMs(truth, x.steps[0]!) / stepTokens) * 1e3;
      check(prefillUsPerToken(calibrated, stepTokens), engineUs, `${x.label}: prefill µs/token`);
    }
    for (const x of itls) {
      check(
        mixedStepMs(calibrated, x.steps[0]!),
        mixedStepMs(truth, x.steps[0]!),
        `${x.label}: decode step ms`,
      );
    }
    const curve = profile.curves[0]!;
    assert.equal(curve.tp, 2);
    check(curve.mfuMax, 0.5, 'mfuMax');
    check(curve.mbu, 0.75, 'mbu');
    return problems;
  } finally {
    await server.close();
  }
}

test('calibrating kvroute engine recovers its prefill µs/token and decode step within 3 %', async () => {
  // Timing from the client on a shared machine: a starved moment can spoil one run, so up to
  // three runs are made; one must be within 3 % at every point. A wrong method fails all three.
  const attempts: string[][] = [];
  for (let i = 0; i < 3; i++) {
    const problems = await calibrateOnce();
    if (problems.length === 0) return;
    attempts.push(problems);
  }
  assert.fail(attempts.map((p, i) => `run ${i + 1}: ${p.join('; ')}`).join('\n'));
});

/** Runs the CLI as a child process without blocking this process's event loop. */
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

test('kvroute calibrate --url: progress lines off a TTY, a profile, a bounded run', async () => {
  const server = await startEngineServer({ host: '127.0.0.1', port: 0, speedup: 5 });
  const tmp = mkdtempSync(join(tmpdir(), 'kvroute-live-'));
  try {
    const out = join(tmp, 'live.yaml');
    const r = await runCliAsync(
      [
        'calibrate',
        '--url',
        server.url,
        '--speedup',
        '5',
        '--budget-s',
        '20',
        '--max-batch',
        '4',
        '--max-prompt-tokens',
        '4096',
        '--repeats',
        '3',
        '--out',
        out,
      ],
      60_000,
    );
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /^calibrate: prefill 64 tokens: \d+\.\d ms$/m);
    assert.match(r.stderr, /^calibrate: decode batch 1 x 256 tokens: /m);
    assert.match(r.stdout, /^source: live http:\/\/127\.0\.0\.1:\d+ \(model llama-3\.3-70b\)$/m);
    const profile = readProfile(out);
    assert.equal(profile.measuredOn.gpu, 'h200');
    assert.equal(profile.curves[0]!.objective, 'least-squares');
    assert.ok(profile.curves[0]!.points.length >= 6);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
    await server.close();
  }
});

test('kvroute calibrate --url against nothing listening: one line, exit 2', async () => {
  const r = await runCliAsync(
    [
      'calibrate',
      '--url',
      'http://127.0.0.1:9',
      '--catalog-model',
      'llama-3.3-70b',
      '--budget-s',
      '5',
      '--out',
      '/dev/null',
    ],
    30_000,
  );
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /^kvroute calibrate: http:\/\/127\.0\.0\.1:9: refused/);
  assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
});
