/**
 * Mixed fleets: each replica's speed reaches delay-cost (milliseconds compared across speeds),
 * the simulator's `--fleet` groups run engines of their own hardware, and bad groups are refused
 * in one line naming the flag.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeProfile } from '../../src/calibrate/profileFile.ts';
import { calibrateFromVidur } from '../../src/calibrate/vidur.ts';
import { makeReplicaSpec } from '../../src/model/spec.ts';
import { ROOT } from '../support/cli.ts';
import { describe, test } from 'node:test';
import { UsageError } from '../../src/cli/args.ts';
import { parseSimFlags } from '../../src/cli/sim.ts';
import { ENGINE_DEFAULTS, makeEngineConfig } from '../../src/engine/options.ts';
import {
  decodeStepMsOf,
  type PickInput,
  type ReplicaSpeed,
  Router,
} from '../../src/router/index.ts';
import { DelayCostPolicy } from '../../src/router/policies/delayCost.ts';
import { replicaEngineOptions, replicaSpeed, replicaSpeeds } from '../../src/sim/replicaGroups.ts';
import { simulate } from '../../src/sim/run.ts';
import { Rng } from '../../src/util/rng.ts';
import { BLOCK, replicaView, request, tokens } from '../support/routing.ts';

const speed = (prefillMsPerToken: number, decodeBaseMs = 10): ReplicaSpeed => ({
  prefillMsPerToken,
  decodeBaseMs,
  decodeMsPerKvToken: 1e-5,
});

const input = (candidates: ReturnType<typeof replicaView>[]): PickInput => ({
  request: { id: 'q', blockKeys: [], promptTokens: 8_000, blockSize: BLOCK },
  nowMs: 0,
  candidates,
  fleet: candidates.map((c) => c.name),
  fleetVersion: 1,
  rng: new Rng(1),
});

describe("delay-cost with each replica's speed", () => {
  test('tokens are priced at the candidate’s own prefill time: ms compared across speeds', () => {
    const policy = new DelayCostPolicy({ prefillUsPerToken: 100 });
    // Replica 0 has 2,000 tokens queued but prefills twice as fast: (2,000 + 8,000) x 0.05 ms =
    // 500 ms against 8,000 x 0.1 ms = 800 ms on the idle, slower replica 1.
    const { replicaId, scores } = policy.pick(
      input([
        replicaView(0, {
          queuedPromptTokens: 2_000,
          prefillRequests: 1,
          inFlight: 1,
          speed: speed(0.05),
        }),
        replicaView(1, { speed: speed(0.1) }),
      ]),
    );
    assert.equal(replicaId, 0);
    assert.deepEqual(scores, [500, 800]);
    // Without speeds the tokens alone decide: the idle replica.
    const blind = policy.pick(
      input([
        replicaView(0, { queuedPromptTokens: 2_000, prefillRequests: 1, inFlight: 1 }),
        replicaView(1),
      ]),
    );
    assert.equal(blind.replicaId, 1);
    assert.deepEqual(blind.scores, [1_000, 800]);
  });

  test('the router hands each replica its speed (Router.speeds, addReplica)', () => {
    const router = new Router({
      replicas: ['slow', 'fast'],
      speeds: [speed(0.1), speed(0.02)],
      policy: 'delay-cost',
    });
    router.addReplica('late', speed(0.5));
    const d = router.route(request('a', tokens(1, 4_000)), 0);
    assert.equal(d.replica, 'fast');
  });

  test("the seed replica's speed: 71.3 us per token, the seed's 33.5 ms step at batch 64", () => {
    const s = replicaSpeed(makeEngineConfig(ENGINE_DEFAULTS));
    assert.equal((s.prefillMsPerToken * 1000).toFixed(1), '71.3');
    // The weights read once: 70.55 GB / (2 x 4.8 TB/s x 0.75) = 9.80 ms.
    assert.equal(s.decodeBaseMs.toFixed(2), '9.80');
    assert.equal(decodeStepMsOf(s, 64, 8_150).toFixed(1), '33.5');
  });
});

describe('kvroute sim --fleet', () => {
  test('groups expand to replicas in order, each with its hardware', () => {
    const parsed = parseSimFlags(['--fleet', 'h200:tp2:2,h100-sxm:tp4:1', '--duration', '5']);
    assert.ok(parsed !== 'help');
    assert.equal(parsed.base.replicas, 3);
    const options = replicaEngineOptions(parsed.base.engine, parsed.base.fleet!);
    assert.deepEqual(
      options.map((o) => `${o.gpu}:${o.tp}`),
      ['h200:2', 'h200:2', 'h100-sxm:4'],
    );
    const speeds = replicaSpeeds(parsed.base.engine, parsed.base.fleet!);
    // TP4 H100 has 4 x 1,979 TFLOP/s against TP2 H200's 2 x 1,979: half the prefill time.
    assert.equal(speeds[2]!.prefillMsPerToken * 2, speeds[0]!.prefillMsPerToken);
  });

  test("each replica runs its group's engine: a fleet's hardware sets its TTFT", () => {
    const ttftP50 = (fleet: string): number => {
      const parsed = parseSimFlags([
        ...['--fleet', fleet, '--rate', '4', '--duration', '20', '--warmup', '2'],
      ]);
      assert.ok(parsed !== 'help');
      const run = simulate(parsed.base);
      assert.equal(run.errors, 0);
      return run.ttftMs.p50;
    };
    // TP8 H200 computes 4x the FLOP/s of TP2 H100: a warm 2,000-token prefill takes 36 ms
    // against 143 ms; the mixed fleet lands between the two.
    const fast = ttftP50('h200:tp8:2');
    const slow = ttftP50('h100-sxm:tp2:2');
    const mixed = ttftP50('h100-sxm:tp2:1,h200:tp8:1');
    assert.ok(fast < mixed && mixed < slow, `${fast} < ${mixed} < ${slow}`);
  });

  const refused: [string[], RegExp][] = [
    [['--fleet', 'h300:tp2:4'], /^--fleet: unknown GPU 'h300'; accepted: h100-sxm, h200, /],
    [['--fleet', 'h200:2:4'], /^--fleet: '2' in 'h200:2:4' is not tpN/],
    [
      ['--fleet', 'h200:tp2:0'],
      /^--fleet: replica count '0' in 'h200:tp2:0' is not a positive integer/,
    ],
    [['--fleet', 'a10g:tp1:2'], /^--fleet a10g:tp1:2: TP 1 does not fit Llama 3\.3 70B Instruct/],
    [
      ['--fleet', 'h200:tp2:2:cache=1'],
      /^--fleet: unknown option 'cache=1' in 'h200:tp2:2:cache=1'; accepted: profile=FILE/,
    ],
    [
      ['--fleet', 'h200:tp2:2:profile=/nonexistent.json'],
      /^--fleet h200:tp2:2:profile=\/nonexistent\.json: profile /,
    ],
    [
      ['--fleet', 'h200:tp2:2', '--replicas', '3'],
      /^--fleet sets each replica's hardware and the count; drop --replicas/,
    ],
    [['--fleet', 'h200:tp2:2', '--gpu', 'h200'], /drop --gpu$/],
  ];
  for (const [argv, message] of refused) {
    test(`refused: ${argv.join(' ')}`, () => {
      assert.throws(
        () => parseSimFlags(argv),
        (err: unknown) => {
          assert.ok(err instanceof UsageError);
          assert.match(err.message, message);
          assert.ok(!err.message.includes('\n'));
          return true;
        },
      );
    });
  }
});

describe('kvroute sim --fleet with profiles', () => {
  test('a group profiled on another model is refused, naming the group', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvroute-fleet-profile-'));
    try {
      const path = join(dir, 'llama2.yaml');
      writeProfile(
        path,
        calibrateFromVidur({
          dir: join(ROOT, 'test/fixtures/vidur/h100/meta-llama/Llama-2-70b-hf'),
          spec: makeReplicaSpec({
            model: 'llama-2-70b',
            gpu: 'h100-sxm',
            tp: 1,
            weightsDtype: 'bf16',
          }),
          objective: 'minimax',
        }),
      );
      const group = `h100-sxm:tp4:2:profile=${path}`;
      assert.throws(
        () => parseSimFlags(['--fleet', `h200:tp2:2,${group}`]),
        (err: unknown) =>
          err instanceof UsageError &&
          err.message ===
            `--fleet: ${group} has a profile measured on llama-2-70b, the fleet serves llama-3.3-70b (--model): every replica serves one model`,
      );
      // The profile's own model: accepted, the group timed by it.
      const parsed = parseSimFlags(['--model', 'llama-2-70b', '--fleet', `h200:tp2:2,${group}`]);
      assert.ok(parsed !== 'help');
      assert.equal(parsed.base.fleet![1]!.profilePath, path);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
