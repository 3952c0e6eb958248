/**
 * `kvroute plan --search-fleet`: the cheapest candidate of a GPU x TP grid, shards that merge to
 * the unsharded answer, the limits of candidates that meet the SLO at no count, and bad input as
 * one line naming the flag; with `pd`, every GPU x TP also as a P:D split found by `kvroute sim
 * --search --pd auto`'s search, on worker threads as in this thread, sharded and merged to the
 * unsharded bytes. Searches are kept tiny (a few seconds of a slow workload).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fleetJson, fleetText } from '../../src/cli/planFleet.ts';
import { readPrices } from '../../src/cli/priceFlag.ts';
import { ENGINE_DEFAULTS } from '../../src/engine/options.ts';
import { GPUS } from '../../src/model/catalog.ts';
import { fleetLimit, workloadShape } from '../../src/sim/fleetLimit.ts';
import {
  cheapestOf,
  type FleetSearchSpec,
  mergeFleetParts,
  runFleetSearch,
} from '../../src/sim/fleetSearch.ts';
import { searchPd } from '../../src/sim/pd/runPd.ts';
import type { SimConfig } from '../../src/sim/run.ts';
import { runCli } from '../support/cli.ts';

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

describe('kvroute plan --search-fleet --pd --shard i/n, then --merge-shards', () => {
  test('the parts merge to what the unsharded search prints, text and --json', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvroute-pd-shards-'));
    try {
      const args = [
        ...['plan', '--search-fleet', '--pd', '--gpus', 'h100-sxm', '--tp', '8'],
        ...['--duration', '6', '--warmup', '1', '--rate', '2', '--max-replicas', '4'],
        ...['--threads', '1', '--quiet'],
      ];
      const parts = [0, 1].map((i) => join(dir, `part-${i}.json`));
      parts.forEach((out, i) => {
        const r = runCli([...args, '--shard', `${i}/2`, '--out', out]);
        assert.equal(r.status, 0, r.stderr);
      });
      for (const json of [[], ['--json']]) {
        const merged = runCli(['plan', '--merge-shards', parts.join(','), ...json]);
        assert.equal(merged.status, 0, merged.stderr);
        const whole = runCli([...args, ...json]);
        assert.equal(whole.status, 0, whole.stderr);
        assert.equal(merged.stdout, whole.stdout);
        if (json.length === 0) {
          assert.match(whole.stdout, /^h100-sxm TP8 +aggregated /m);
          assert.match(whole.stdout, /^h100-sxm TP8 +P:D (\d+:\d+|-) /m);
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
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
    [
      ['--transfer-gbps', '10'],
      /^kvroute plan: --transfer-gbps and --transfer-latency-ms go with --pd/,
    ],
    [
      ['--pd', '--transfer-gbps', '0'],
      /^kvroute plan: --transfer-gbps must be greater than 0, got 0/,
    ],
    [
      ['--pd', '--transfer-latency-ms', 'x'],
      /^kvroute plan: --transfer-latency-ms must be a number, got 'x'/,
    ],
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

  test('--merge-shards with --pd: the parts say whether the search had P/D', () => {
    const r = runCli(['plan', '--merge-shards', 'a.json', '--pd']);
    assert.equal(r.status, 2);
    assert.match(
      r.stderr,
      /^kvroute plan: --merge-shards reads the parts of a search; drop --search-fleet, --shard and --pd\n$/,
    );
  });

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
