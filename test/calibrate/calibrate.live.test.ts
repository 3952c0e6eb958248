/**
 * Live calibration against a real `kvroute engine` (in process, on 127.0.0.1), whose cost model
 * is known: the fit gives back that model exactly from exact timings, and a live run measures
 * every probe with no first token sooner than the model allows. How close the live fit comes is
 * `npm run bench:calibrate`'s figure. The engine runs at --speedup 2, so the live run takes
 * about fifteen seconds of wall time.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import {
  type LiveMeasurements,
  liveProfile,
  measureLive,
  measuredRequestOverhead,
  planProbes,
  prefillSteps,
} from '../../src/calibrate/live.ts';
import { readProfile } from '../../src/calibrate/profileFile.ts';
import { startEngineServer } from '../../src/engine/server/server.ts';
import type { Observation } from '../../src/model/fit.ts';
import { makeReplicaSpec, mixedStepMs, prefillUsPerToken } from '../../src/model/index.ts';

const ROOT = new URL('../..', import.meta.url).pathname;

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

/** What a live run would measure with no delay at all: the engine's own cost model, exactly. */
function exactObservations(truth: ReturnType<typeof makeReplicaSpec>): LiveMeasurements {
  const observations: Observation[] = planProbes(2048, 8192, 16).map((p) => {
    if (p.kind === 'prefill') {
      const steps = prefillSteps(p.promptTokens, 2048);
      const measuredMs = steps.reduce((sum, w) => sum + mixedStepMs(truth, w), 0);
      return {
        kind: 'ttft',
        label: `prompt ${p.promptTokens}`,
        steps,
        perRequest: true,
        measuredMs,
      };
    }
    if (p.kind !== 'decode') throw new Error(`planProbes planned a ${p.kind} probe`);
    const kvTokensRead = Math.round((p.contextTokens + p.outputTokens / 2) * p.batch);
    const steps = [{ prefillTokens: 0, decodeTokens: p.batch, kvTokensRead }];
    return {
      kind: 'itl',
      label: `decode batch ${p.batch}`,
      steps,
      perRequest: false,
      measuredMs: mixedStepMs(truth, steps[0]!),
    };
  });
  return {
    model: 'llama-3.3-70b',
    observations,
    warmColdPairs: [],
    requestOverheadsMs: [],
    textOverheads: [],
    tilePairs: [],
    skipped: [],
    wallS: 0,
  };
}

test("the live fit recovers the engine's cost model from its exact timings", () => {
  const truth = makeReplicaSpec();
  const m = exactObservations(truth);
  const profile = liveProfile(m, truth, { url: 'x', budgetTokens: 2048, speedup: 1 });
  const curve = profile.curves[0]!;
  assert.equal(curve.tp, 2);
  // The seed replica: 50 % MFU prefill, 75 % MBU decode.
  assert.ok(Math.abs(curve.mfuMax - 0.5) < 1e-9, `${curve.mfuMax}`);
  assert.ok(Math.abs(curve.mbu - 0.75) < 1e-9, `${curve.mbu}`);
  const calibrated = makeReplicaSpec({ profile });
  for (const x of m.observations) {
    const w = x.steps[0]!;
    const [got, want] =
      x.kind === 'ttft'
        ? [
            prefillUsPerToken(calibrated, w.prefillTokens),
            (mixedStepMs(truth, w) / w.prefillTokens) * 1e3,
          ]
        : [mixedStepMs(calibrated, w), mixedStepMs(truth, w)];
    assert.ok(Math.abs(got / want - 1) < 1e-9, `${x.label}: ${got} vs ${want}`);
  }
});

test('calibrating a live kvroute engine: every probe measured, no TTFT before the model allows', async () => {
  // How close the live fit comes (client-side timings on a shared machine) is a figure, not a
  // test: `npm run bench:calibrate`. Here: the plan runs whole, the steps are the engine's, and
  // a first token never arrives before the engine's modeled prefill (its driver waits that out).
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
    const truth = makeReplicaSpec();
    const ttfts = m.observations.filter((x) => x.kind === 'ttft');
    const itls = m.observations.filter((x) => x.kind === 'itl');
    // A decode point needs all its streams running at once for a while; on a busy host some
    // come out in bursts or overlap too little, and are skipped saying so. Nothing else is.
    const busy = m.skipped.filter((s) => /^decode batch .*(bursts|decode gaps)/.test(s));
    assert.deepEqual(
      m.skipped.filter((s) => !busy.includes(s)),
      [],
      'nothing skipped but decode points a busy host could not time',
    );
    assert.equal(ttfts.length, 8, 'a TTFT for each prompt length 64 .. 8,192');
    assert.equal(itls.length + busy.length, 9, 'each decode point measured or said untimeable');
    for (const x of ttfts) {
      const promptTokens = x.steps.reduce((n, w) => n + w.prefillTokens, 0);
      assert.deepEqual(x.steps, prefillSteps(promptTokens, 2048), `${x.label}: the chunks`);
      const modelMs = x.steps.reduce((sum, w) => sum + mixedStepMs(truth, w), 0);
      assert.ok(x.measuredMs >= modelMs * 0.999, `${x.label}: ${x.measuredMs} < ${modelMs} ms`);
    }
    // Each prefill probe's request ran alone: its overhead is its TTFT less the prefill time
    // the engine counted, never below 0 (its first step starts after it arrives).
    assert.ok(m.requestOverheadsMs.length >= ttfts.length, `${m.requestOverheadsMs.length}`);
    for (const ms of m.requestOverheadsMs) assert.ok(ms > -1, `overhead ${ms} ms`);
    const profile = liveProfile(m, truth, o);
    const curve = profile.curves[0]!;
    // The fit holds the measured overhead (and does not name it among the held-at-0 ones).
    assert.equal(curve.requestOverheadMs, measuredRequestOverhead(m.requestOverheadsMs));
    assert.ok(!curve.fixed.includes('requestOverheadMs'));
    assert.equal(curve.tp, 2);
    assert.ok(curve.mfuMax > 0 && curve.mfuMax <= 1 && curve.mbu > 0 && curve.mbu <= 1);
  } finally {
    await server.close();
  }
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
      300_000,
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
    300_000,
  );
  assert.equal(r.status, 2, r.stderr);
  assert.match(r.stderr, /^kvroute calibrate: http:\/\/127\.0\.0\.1:9: refused/);
  assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
});
