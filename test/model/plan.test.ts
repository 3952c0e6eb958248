import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { makeReplicaSpec } from '../../src/model/spec.ts';
import {
  planRouter,
  planScheduler,
  routerPlanJson,
  SEED_LOAD,
  SEED_SCHEDULER,
  schedulerPlanJson,
} from '../../src/model/plan.ts';
import { kvBytesPerToken, mixedStepMs } from '../../src/model/cost.ts';
import { runCli } from '../support/cli.ts';

describe('router seed arithmetic', () => {
  const plan = planRouter(makeReplicaSpec(), SEED_LOAD);
  const json = routerPlanJson(plan);

  test('prefill, hit saving and TTFT compute', () => {
    assert.equal(json.prefillUsPerToken, 71.3);
    assert.equal(json.hitSavesMs, 428);
    assert.equal(json.ttftColdMs, 570);
    assert.equal(json.ttftWarmMs, 143);
  });

  test('KV pool and prefix fit', () => {
    assert.equal(kvBytesPerToken(makeReplicaSpec().model, 'bf16'), 327_680);
    // The seed prints 558,124; its own formula gives 558,135.98.
    assert.equal(json.kvPoolTokens, 558_136);
    assert.equal(json.prefixesPerReplica, 70);
    assert.equal(json.prefixSetTokens, 1_200_000);
    assert.equal(json.prefixSetPools, 2.2);
  });

  test('decode and fleet size', () => {
    assert.equal(json.decodeStepMs, 33.5);
    assert.equal(json.replicaDecodeTokensPerS, 1908);
    assert.equal(json.decodeReplicaSeconds, 6.29);
    assert.deepEqual(json.noAffinity, { prefillReplicaSeconds: 22.82, replicas: 45, gpus: 90 });
    assert.deepEqual(json.affinity, {
      hitRate: 0.9,
      prefillReplicaSeconds: 7.42,
      replicas: 22,
      gpus: 44,
    });
  });

  test('hot customer, spill threshold and verdict', () => {
    assert.deepEqual(json.hotCustomer, {
      share: 0.1,
      replicaSecondsPerRequest: 0.3,
      replicasNeeded: 1.8,
    });
    assert.deepEqual(json.spill, { tokens: 6000, ms: 428 });
    assert.equal(json.verdict, 'affinity');
  });

  test('the reversal condition: little shared, or the prefix set fits everywhere', () => {
    const spec = makeReplicaSpec();
    assert.equal(planRouter(spec, { ...SEED_LOAD, sharedTokens: 1200 }).verdict, 'least-queued');
    assert.equal(planRouter(spec, { ...SEED_LOAD, prefixes: 20 }).verdict, 'least-queued');
    assert.equal(planRouter(spec, { ...SEED_LOAD, sharedTokens: 1600 }).verdict, 'affinity');
  });
});

describe('scheduler seed arithmetic', () => {
  const spec = makeReplicaSpec({ gpu: 'h100-sxm', tp: 4, mfu: 1, mbu: 1 });
  const json = schedulerPlanJson(planScheduler(spec, SEED_SCHEDULER));

  test('step time per budget at peak, steps to first token, decode floor', () => {
    assert.deepEqual(
      json.budgets.map((b) => [b.budget, b.stepMs]),
      [
        [512, 9.1],
        [2048, 36.5],
        [8192, 146.0],
      ],
    );
    assert.equal(json.budgets[1]?.stepsToFirstToken, 17);
    assert.equal(json.budgets[2]?.stepsToFirstToken, 5);
    assert.equal(json.decodeFloorMs, 5.3);
  });

  test('a budget the decodes use up never reaches the first token', () => {
    const p = planScheduler(spec, { budgets: [64], promptTokens: 100, decodes: 64 });
    assert.equal(p.budgets[0]?.stepsToFirstToken, null);
  });
});

describe('mixed step time', () => {
  const spec = makeReplicaSpec();
  test('decode-only steps are memory bound and match the decode formula', () => {
    const ms = mixedStepMs(spec, { prefillTokens: 0, decodeTokens: 64, kvTokensRead: 64 * 8150 });
    assert.equal(Math.round(ms * 10) / 10, 33.5);
  });
  test('prefill-heavy steps are compute bound: 8,000 tokens take the cold TTFT', () => {
    const ms = mixedStepMs(spec, { prefillTokens: 8000, decodeTokens: 0, kvTokensRead: 0 });
    assert.equal(Math.round(ms), 570);
  });
  test('an empty step takes no time', () => {
    assert.equal(mixedStepMs(spec, { prefillTokens: 0, decodeTokens: 0, kvTokensRead: 0 }), 0);
  });
});

describe('kvroute plan CLI', () => {
  test('--json prints the seed figures with exactly the documented keys', () => {
    const r = runCli(['plan', '--json']);
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.deepEqual(Object.keys(out), [
      'prefillUsPerToken',
      'hitSavesMs',
      'ttftColdMs',
      'ttftWarmMs',
      'kvPoolTokens',
      'prefixesPerReplica',
      'prefixSetTokens',
      'prefixSetPools',
      'decodeStepMs',
      'replicaDecodeTokensPerS',
      'decodeReplicaSeconds',
      'noAffinity',
      'affinity',
      'hotCustomer',
      'spill',
      'verdict',
    ]);
    assert.equal(out.affinity.gpus, 44);
  });

  test('--preset seed-scheduler --json', () => {
    const r = runCli(['plan', '--preset', 'seed-scheduler', '--json']);
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.deepEqual(Object.keys(out), ['budgets', 'decodeFloorMs']);
    assert.deepEqual(Object.keys(out.budgets[0]), ['budget', 'stepMs', 'stepsToFirstToken']);
  });

  test('the readable derivation names the spill threshold and the verdict', () => {
    const r = runCli(['plan']);
    assert.equal(r.status, 0);
    assert.match(r.stdout, /558,136 tokens/);
    assert.match(r.stdout, /6,000 tokens \(428 ms of prefill\)/);
    assert.match(r.stdout, /Verdict: affinity is worth having/);
    // The decode step's KV term in numbers: 327,680 B per token over TP 2.
    assert.match(
      r.stdout,
      /step {14}= \(35\.3 GB \+ 64 x 8,150 x 163,840 B\) \/ \(4\.80e12 x 0\.75\) = 33\.5 ms/,
    );
    assert.doesNotMatch(r.stdout, /KV B/);
  });

  test('the scheduler table says what its columns mean', () => {
    const r = runCli(['plan', '--preset', 'seed-scheduler']);
    assert.equal(r.status, 0, r.stderr);
    const lines = r.stdout.split('\n');
    const last = lines.findIndex((l) => /^ +8,192 +146\.0 +5$/.test(l));
    assert.ok(last > 0, r.stdout);
    assert.match(
      lines[last + 1]!,
      /^ {2}budget: tokens per step; step ms: .*; steps to first token: /,
    );
  });

  const bad: [string[], RegExp][] = [
    [
      ['--gpu', 'h300'],
      /unknown GPU 'h300'; known: h100-sxm, h200, b200, a100-80gb, a100-40gb, l4, l40s/,
    ],
    [['--model', 'gpt5'], /unknown model 'gpt5'; known: .*llama-3.3-70b/],
    [['--rate', '-1'], /--rate must be greater than 0, got -1/],
    [['--rate', '0'], /--rate must be greater than 0/],
    [['--prompt-tokens', 'lots'], /--prompt-tokens must be an integer, got 'lots'/],
    [['--shared-tokens', '9000'], /--shared-tokens \(9000\) must not exceed --prompt-tokens/],
    [['--tp', '1', '--gpu', 'l40s'], /--tp 1 does not fit/],
    [['--tp', '3'], /--tp must be a power of two/],
    [['--mfu', '1.5'], /--mfu must be at most 1/],
    [['--weights-dtype', 'int4'], /--weights-dtype must be one of bf16, fp8/],
    [['--preset', 'x'], /--preset must be one of seed-router, seed-scheduler/],
    [['--bogus'], /Unknown option '--bogus'/],
  ];
  for (const [args, message] of bad) {
    test(`rejects ${args.join(' ')} with one line and exit 2`, () => {
      const r = runCli(['plan', ...args]);
      assert.equal(r.status, 2);
      assert.match(r.stderr, message);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
      assert.equal(r.stdout, '');
    });
  }
});
