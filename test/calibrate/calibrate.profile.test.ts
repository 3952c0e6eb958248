/**
 * The profile file and `--profile` on plan, sim and engine: a file written reads back the same,
 * a calibrated model changes the figures, and a bad file is one CLI line naming the flag.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { readProfile, writeProfile } from '../../src/calibrate/profileFile.ts';
import { calibrateFromVidur } from '../../src/calibrate/vidur.ts';
import { readEngineOptions } from '../../src/cli/engine.ts';
import { ENGINE_FLAGS } from '../../src/cli/engineFlags.ts';
import { readFlags } from '../../src/cli/args.ts';
import { EngineCore } from '../../src/engine/core.ts';
import { resolveEngineOptions } from '../../src/engine/server/options.ts';
import { makeReplicaSpec, ProfileError, profileFromData } from '../../src/model/index.ts';
import { ROOT, runCli } from '../support/cli.ts';

const tmp = mkdtempSync(join(tmpdir(), 'kvroute-profile-'));
after(() => rmSync(tmp, { recursive: true, force: true }));

const vidur = calibrateFromVidur({
  dir: join(ROOT, 'test/fixtures/vidur/h100/meta-llama/Llama-2-70b-hf'),
  spec: makeReplicaSpec({ model: 'llama-2-70b', gpu: 'h100-sxm', tp: 1, weightsDtype: 'bf16' }),
  objective: 'minimax',
});
const PROFILE = join(tmp, 'vidur.yaml');
writeProfile(PROFILE, vidur);

describe('profile file', () => {
  test('round trip: what is written reads back equal', () => {
    assert.deepEqual(readProfile(PROFILE), vidur);
  });

  const cases: [string, unknown, RegExp][] = [
    ['wrong format', { ...vidur, format: 'x' }, /format must be 'kvroute-profile\/1', got 'x'/],
    ['no curves', { ...vidur, curves: [] }, /curves must be a non-empty list/],
    [
      'an unknown GPU',
      { ...vidur, measuredOn: { ...vidur.measuredOn, gpu: 'h300' } },
      /measuredOn.gpu must be one of/,
    ],
    [
      'a negative MFU',
      { ...vidur, curves: [{ ...vidur.curves[0], mfuMax: -1 }] },
      /curves\[0\]\.mfuMax must be a number > 0, got -1/,
    ],
    [
      'a TP twice',
      { ...vidur, curves: [vidur.curves[0], vidur.curves[0]] },
      /curves has a TP degree twice/,
    ],
  ];
  for (const [what, data, message] of cases) {
    test(`refuses ${what}`, () => {
      assert.throws(
        () => profileFromData(data),
        (err: unknown) => err instanceof ProfileError && message.test((err as Error).message),
      );
    });
  }
});

describe('--profile on plan', () => {
  test('the calibrated model changes the figures and plan says which model it used', () => {
    const plain = runCli(['plan']);
    const calibrated = runCli(['plan', '--profile', PROFILE]);
    assert.equal(calibrated.status, 0, calibrated.stderr);
    assert.match(
      plain.stdout,
      /^Cost model: roofline defaults \(50% MFU prefill, 75% MBU decode\)$/m,
    );
    assert.match(
      calibrated.stdout,
      new RegExp(`^Cost model: profile ${PROFILE} \\(Vidur profile .*mlp\\.csv\\)\\)$`, 'm'),
    );
    assert.match(calibrated.stdout, /TP=2 curve: MFU\(n\) = 0\.733 x n \/ \(n \+ 58\.8\)/);
    assert.match(calibrated.stdout, /note: measured on Llama 2 70B, H100 SXM 80GB, BF16 weights/);
    const a = JSON.parse(runCli(['plan', '--json']).stdout);
    const b = JSON.parse(runCli(['plan', '--json', '--profile', PROFILE]).stdout);
    assert.notEqual(b.prefillUsPerToken, a.prefillUsPerToken);
    assert.notEqual(b.decodeStepMs, a.decodeStepMs);
    assert.equal(a.costModel, undefined);
    assert.equal(b.costModel.profile, PROFILE);
    assert.equal(b.costModel.curve.tp, 2);
  });

  test('the scheduler preset uses the TP 4 curve', () => {
    const r = runCli(['plan', '--preset', 'seed-scheduler', '--profile', PROFILE, '--json']);
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.equal(out.costModel.curve.tp, 4);
    assert.notEqual(out.budgets[0].stepMs, 9.1);
  });
});

describe('--profile on sim and engine', () => {
  test('sim: the same run with a profile gives other latencies', () => {
    const args = ['sim', '--quiet', '--json', '--replicas', '2', '--rate', '2', '--duration', '20'];
    const plain = runCli(args, 300_000);
    const calibrated = runCli([...args, '--profile', PROFILE], 300_000);
    assert.equal(plain.status, 0, plain.stderr);
    assert.equal(calibrated.status, 0, calibrated.stderr);
    const ttft = (out: string) => JSON.parse(out).results[0].ttftMs.p50;
    assert.notEqual(ttft(calibrated.stdout), ttft(plain.stdout));
  });

  test('engine: the flag reaches the core, whose steps take the calibrated time', () => {
    const flags = readFlags(['--profile', PROFILE], ENGINE_FLAGS);
    assert.notEqual(flags, 'help');
    const options = readEngineOptions(flags as Exclude<typeof flags, 'help'>);
    const resolved = resolveEngineOptions(options);
    assert.equal(resolved.engineConfig.spec.calibration?.curve.tp, 2);
    const duration = (config: typeof resolved.engineConfig) => {
      const core = new EngineCore(config);
      core.add({
        id: 'a',
        promptTokens: Array.from({ length: 512 }, (_, i) => i),
        maxNewTokens: 1,
        arrivalMs: 0,
      });
      return core.step().durationMs;
    };
    const plain = resolveEngineOptions(readEngineOptions(readFlags([], ENGINE_FLAGS) as never));
    assert.notEqual(duration(resolved.engineConfig), duration(plain.engineConfig));
  });

  const bad: [string, string[], RegExp][] = [
    [
      'a missing file',
      ['--profile', join(tmp, 'none.yaml')],
      /--profile .*none\.yaml: no such file/,
    ],
    [
      'a file that is not a profile',
      ['--profile', 'BAD'],
      /--profile .*bad\.yaml: format must be 'kvroute-profile\/1'/,
    ],
    [
      'a TP the profile lacks',
      ['--profile', PROFILE, '--tp', '16'],
      /--profile .* has curves for TP 1, 2, 4, 8; none for --tp 16/,
    ],
  ];
  writeFileSync(join(tmp, 'bad.yaml'), 'hello: world\n');
  for (const command of ['engine', 'sim', 'plan']) {
    for (const [what, args, message] of bad) {
      test(`${command} --profile with ${what}: one line naming the flag, exit 2`, () => {
        const argv = args.map((a) => (a === 'BAD' ? join(tmp, 'bad.yaml') : a));
        const r = runCli([command, ...argv]);
        assert.equal(r.status, 2, r.stderr);
        assert.match(r.stderr, message);
        assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
        assert.equal(r.stdout, '');
      });
    }
  }

  test('plan refuses --profile together with --mfu', () => {
    const r = runCli(['plan', '--profile', PROFILE, '--mfu', '0.4']);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /--profile replaces --mfu and --mbu/);
  });
});
