/**
 * `kvroute plan --search-fleet` (the other parts: test/model/plan.fleet.*.test.ts; the shared
 * search: test/support/planFleet.ts) with `--pd`: every GPU x TP also as a P:D split found by
 * `kvroute sim --search --pd auto`'s search, on worker threads as in this thread, sharded and
 * merged to the unsharded bytes.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { fleetJson, fleetText } from '../../src/cli/planFleet.ts';
import { GPUS } from '../../src/model/catalog.ts';
import {
  cheapestOf,
  type FleetSearchSpec,
  mergeFleetParts,
  runFleetSearch,
} from '../../src/sim/fleetSearch.ts';
import { searchPd } from '../../src/sim/pd/runPd.ts';
import { base, spec } from '../support/planFleet.ts';

/** The search without --pd (its JSON keys against --pd's). */
const whole0 = await runFleetSearch(spec);

describe('--pd: aggregated and disaggregated candidates', async () => {
  const link = { transferGbps: 25, transferLatencyMs: 1 };
  const pdSpec: FleetSearchSpec = { ...spec, gpus: ['h100-sxm'], pd: link };
  const whole = await runFleetSearch(pdSpec);
  const answer = mergeFleetParts([whole]);

  test('each GPU x TP twice, aggregated first; a split priced at both pools', () => {
    assert.deepEqual(
      answer.candidates.map((c) => `${c.gpu}:${c.tp}:${c.shape}`),
      ['h100-sxm'].flatMap((g) =>
        [2, 8].flatMap((tp) => [`${g}:${tp}:aggregated`, `${g}:${tp}:disaggregated`]),
      ),
    );
    for (const c of answer.candidates) {
      if (c.shape === 'aggregated') assert.equal(c.pd, null);
      if (c.dollarsPerHour === null) continue;
      const replicas = c.pd ? c.pd.prefill + c.pd.decode : c.replicas;
      assert.equal(c.replicas, replicas);
      assert.equal(c.gpuCount, replicas! * c.tp);
      assert.equal(
        c.dollarsPerHour,
        Math.round(c.gpuCount! * GPUS[c.gpu]!.price.dollarsPerHour * 100) / 100,
      );
      assert.ok(c.ttftP99Ms! <= 1000 && c.tpotP99Ms! <= 100, `${c.gpu} TP${c.tp} ${c.shape}`);
    }
    assert.ok(answer.candidates.some((c) => c.shape === 'disaggregated' && c.pd !== null));
    assert.equal(cheapestOf(answer.candidates), answer.cheapest);
  });

  test("a split is the one kvroute sim --search --pd auto finds (the same search's pools)", () => {
    // --max-replicas 4: both searches spare pools of 2.
    for (const c of answer.candidates.filter((x) => x.shape === 'disaggregated')) {
      const config = { ...base, engine: { ...base.engine, gpu: c.gpu, tp: c.tp } };
      const s = searchPd(config, base.slo, { ...link, maxReplicas: 4 });
      assert.deepEqual(
        c.pd,
        s.disaggregated && { prefill: s.disaggregated.prefill, decode: s.disaggregated.decode },
        `${c.gpu} TP${c.tp}`,
      );
    }
  });

  test('on two worker threads: the same answer as in this thread', async () => {
    const threaded = mergeFleetParts([await runFleetSearch({ ...pdSpec, threads: 2 })]);
    assert.equal(fleetJson(threaded), fleetJson(answer));
  });

  test('three shards merge to the unsharded bytes', async () => {
    const parts = await Promise.all(
      [0, 1, 2].map((index) => runFleetSearch({ ...pdSpec, shard: { index, count: 3 } })),
    );
    assert.deepEqual(
      parts.map((p) => p.candidates.map((c) => c.number)),
      [[0, 3], [1], [2]],
    );
    const merged = mergeFleetParts([parts[2]!, parts[0]!, parts[1]!]);
    assert.equal(fleetJson(merged), fleetJson(answer));
    assert.equal(fleetText(merged), fleetText(answer));
    // A part of the search without --pd is of another search.
    const plain = await runFleetSearch({
      ...spec,
      gpus: pdSpec.gpus,
      shard: { index: 0, count: 3 },
    });
    assert.throws(() => mergeFleetParts([plain, parts[1]!, parts[2]!]), /of another search/);
  });

  test('--json: cheapest and each candidate carry the shape; without --pd no key changes', () => {
    const j = JSON.parse(fleetJson(answer));
    const c = answer.cheapest!;
    assert.deepEqual(j.cheapest, {
      gpu: c.gpu,
      tp: c.tp,
      replicas: c.replicas,
      dollarsPerHour: c.dollarsPerHour,
      pd: c.pd ?? null,
    });
    assert.deepEqual(j.pd, link);
    for (const x of j.candidates) {
      assert.deepEqual(Object.keys(x).slice(0, 4), ['gpu', 'tp', 'shape', 'pd']);
    }
    const plain = JSON.parse(fleetJson(mergeFleetParts([whole0])));
    assert.equal(plain.pd, undefined);
    for (const x of plain.candidates) assert.ok(!('shape' in x) && !('pd' in x));
  });

  test('the table has a shape column: aggregated or P:D prefill:decode', () => {
    const text = fleetText(answer);
    assert.match(text, /^candidate +shape +\$\/h/m);
    for (const c of answer.candidates) {
      const shape =
        c.shape === 'aggregated'
          ? 'aggregated'
          : c.pd
            ? `P:D ${c.pd.prefill}:${c.pd.decode}`
            : 'P:D -';
      assert.match(text, new RegExp(`^${c.gpu} TP${c.tp} +${shape} `, 'm'));
    }
    assert.match(text, /^P\/D: KV link 25 GB\/s \+ 1 ms a transfer/m);
  });

  test('a limit of one replica holds for every split: named, not searched', async () => {
    const tight = await runFleetSearch({
      ...pdSpec,
      gpus: ['h200'],
      tps: [2],
      base: { ...base, slo: { ttftP99Ms: 1000, tpotP99Ms: 5 } },
    });
    const [agg, split] = tight.candidates.map((c) => c.candidate);
    assert.equal(agg!.limit?.kind, 'tpot-floor');
    assert.equal(split!.shape, 'disaggregated');
    assert.equal(split!.pd, null);
    assert.equal(split!.limit?.kind, 'tpot-floor');
  });
});
