/**
 * `kvroute plan --search-fleet`: the cheapest candidate of a GPU x TP grid, shards that merge to
 * the unsharded answer, the limits of candidates that meet the SLO at no count, and bad input as
 * one line naming the flag. Searches are kept tiny (a few seconds of a slow workload).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fleetJson, fleetText } from '../src/cli/planFleet.ts';
import { readPrices } from '../src/cli/priceFlag.ts';
import { ENGINE_DEFAULTS } from '../src/engine/options.ts';
import { GPUS } from '../src/model/catalog.ts';
import { fleetLimit, workloadShape } from '../src/sim/fleetLimit.ts';
import {
  cheapestOf,
  type FleetSearchSpec,
  mergeFleetParts,
  runFleetSearch,
} from '../src/sim/fleetSearch.ts';
import type { SimConfig } from '../src/sim/run.ts';
import { runCli } from './support/cli.ts';

const base: SimConfig = {
  workload: { kind: 'synthetic', name: 'seed', ratePerS: 2 },
  seed: 3,
  durationMs: 8_000,
  warmupMs: 1_000,
  replicas: 1,
  engine: { ...ENGINE_DEFAULTS },
  router: { policy: 'delay-cost', index: 'events', queueSource: 'ledger' },
  view: { staleMs: 0, reportMs: 100, eventDelayMs: 0 },
  faults: [],
  slo: { ttftP99Ms: 1000, tpotP99Ms: 100 },
};

const spec: FleetSearchSpec = {
  base,
  gpus: ['h200', 'h100-sxm', 'a10g'],
  tps: [2, 8],
  dollarsPerGpuHour: readPrices(undefined),
  maxReplicas: 4,
  threads: 1,
};

describe('the search over a grid', async () => {
  const whole = await runFleetSearch(spec);
  const answer = mergeFleetParts([whole]);

  test('every candidate in grid order; the cheapest meeting the SLO wins', () => {
    assert.deepEqual(
      answer.candidates.map((c) => `${c.gpu}:${c.tp}`),
      ['h200:2', 'h200:8', 'h100-sxm:2', 'h100-sxm:8', 'a10g:2', 'a10g:8'],
    );
    const met = answer.candidates.filter((c) => c.dollarsPerHour !== null);
    assert.ok(met.length > 0, 'some candidate meets a loose SLO on 2 req/s');
    for (const c of met) {
      assert.equal(c.gpuCount, c.replicas! * c.tp);
      assert.equal(
        c.dollarsPerHour,
        Math.round(c.gpuCount! * GPUS[c.gpu]!.price.dollarsPerHour * 100) / 100,
      );
      assert.ok(c.ttftP99Ms! <= 1000 && c.tpotP99Ms! <= 100, `${c.gpu} TP${c.tp} met the SLO`);
      assert.equal(c.limit, null);
    }
    const cheapest = Math.min(...met.map((c) => c.dollarsPerHour!));
    assert.equal(answer.cheapest?.dollarsPerHour, cheapest);
    assert.equal(cheapestOf(answer.candidates), answer.cheapest);
  });

  test('a TP the model does not fit on a GPU is a candidate that says so, unsearched', () => {
    // Llama 3.3 70B in FP8 is 70.6 GB of weights; 2 x 24 GB of A10G cannot hold them.
    const a10g = answer.candidates.find((c) => c.gpu === 'a10g' && c.tp === 2)!;
    assert.equal(a10g.replicas, null);
    assert.equal(a10g.limit?.kind, 'does-not-fit');
    assert.match(a10g.limit!.detail, /^TP 2 does not fit Llama 3\.3 70B/);
  });

  test('two shards merge to the unsharded answer, byte for byte, in any order', async () => {
    const parts = await Promise.all(
      [0, 1].map((index) => runFleetSearch({ ...spec, shard: { index, count: 2 } })),
    );
    // Disjoint slices: even grid numbers in shard 0, odd in shard 1.
    assert.deepEqual(
      parts[0]!.candidates.map((c) => c.number),
      [0, 2, 4],
    );
    assert.deepEqual(
      parts[1]!.candidates.map((c) => c.number),
      [1, 3, 5],
    );
    const merged = mergeFleetParts([parts[1]!, parts[0]!]);
    assert.equal(fleetJson(merged), fleetJson(answer));
    assert.equal(fleetText(merged), fleetText(answer));
    assert.throws(() => mergeFleetParts([parts[0]!]), /missing shard 1\/2/);
    assert.throws(() => mergeFleetParts([parts[0]!, parts[0]!]), /shard 0\/2 given twice/);
    const other = { ...parts[1]!, header: { ...parts[1]!.header, maxReplicas: 9 } };
    assert.throws(() => mergeFleetParts([parts[0]!, other]), /of another search/);
  });

  test('--json: cheapest as {gpu, tp, replicas, dollarsPerHour} and every candidate', () => {
    const j = JSON.parse(fleetJson(answer));
    const c = answer.cheapest!;
    assert.deepEqual(j.cheapest, {
      gpu: c.gpu,
      tp: c.tp,
      replicas: c.replicas,
      dollarsPerHour: c.dollarsPerHour,
    });
    assert.equal(j.candidates.length, 6);
  });
});

describe('limits of a candidate that meets the SLO at no count', () => {
  const shape = workloadShape(base);
  const notMet = { reason: 'not-met' as const, measured: 200, outOfReach: 0, maxReplicas: 4 };

  test('KV fit: the longest request is larger than the pool', () => {
    const config = { ...base, engine: { ...base.engine, kvBlocks: 100 } };
    const limit = fleetLimit(config, shape, notMet);
    assert.equal(limit.kind, 'kv-fit');
    assert.match(limit.detail, /pool 1,600$/);
  });

  test('TPOT floor: one sequence alone decodes slower than the target', () => {
    const limit = fleetLimit({ ...base, slo: { ttftP99Ms: 1000, tpotP99Ms: 5 } }, shape, notMet);
    assert.equal(limit.kind, 'tpot-floor');
  });

  test("prefill floor: requests out of reach alone on an idle replica; else the search's limit", () => {
    const outOfReach = { ...notMet, reason: 'out-of-reach' as const, outOfReach: 150 };
    assert.equal(fleetLimit(base, shape, outOfReach).kind, 'prefill-floor');
    assert.equal(fleetLimit(base, shape, notMet).kind, 'max-replicas');
  });
});

describe('bad input: one line naming the flag and the accepted values (exit 2)', () => {
  const plan = (...args: string[]) =>
    runCli(['plan', '--search-fleet', '--gpus', 'h200', '--tp', '4', ...args]);
  const cases: [string[], RegExp][] = [
    [['--gpus', 'h300'], /^kvroute plan: --gpus: unknown GPU 'h300'; accepted: h100-sxm, h200, /],
    [['--tp', '3'], /^kvroute plan: --tp: '3' is not a power of two; accepted: 1, 2, 4, 8/],
    [
      ['--tp', '128'],
      /^kvroute plan: --tp 128 does not divide Llama 3\.3 70B Instruct's 64 attention heads/,
    ],
    [['--price', 'h200=abc'], /^kvroute plan: --price h200=abc: \$\/h must be a positive number/],
    [['--price', 'tpu=2'], /^kvroute plan: --price: unknown GPU 'tpu' in 'tpu=2'; accepted: /],
    [['--shard', '2/2'], /^kvroute plan: --shard must be i\/n with 0 <= i < n/],
  ];
  for (const [args, message] of cases) {
    test(args.join(' '), () => {
      // The later --gpus / --tp stand in for the earlier ones.
      const r = plan(...args);
      assert.equal(r.status, 2, r.stderr);
      assert.match(r.stderr, message);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
    });
  }

  test('--merge-shards of a file that is not a part', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvroute-merge-'));
    try {
      const r = runCli(['plan', '--merge-shards', join(dir, 'none.json')]);
      assert.equal(r.status, 2);
      assert.match(r.stderr, /^kvroute plan: --merge-shards: cannot read /);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
