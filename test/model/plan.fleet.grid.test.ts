/**
 * `kvroute plan --search-fleet` (the other parts: test/model/plan.fleet.*.test.ts; the shared
 * search: test/support/planFleet.ts): the cheapest candidate of a GPU x TP grid,
 * shards that merge to the unsharded answer, and the limits of candidates that meet the SLO at no
 * count.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { fleetJson, fleetText } from '../../src/cli/planFleet.ts';
import { GPUS } from '../../src/model/catalog.ts';
import { fleetLimit, workloadShape } from '../../src/sim/fleetLimit.ts';
import { cheapestOf, mergeFleetParts, runFleetSearch } from '../../src/sim/fleetSearch.ts';
import { base, spec } from '../support/planFleet.ts';

const whole0 = await runFleetSearch(spec);

describe('the search over a grid', async () => {
  const whole = whole0;
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
