/**
 * Live versus simulated, small: the router seed's hot-customer workload at a tenth of its rate
 * on 4 replicas, 24 s of workload time at speedup 1, cost against random (the hot customer's
 * repeats give the hit rate enough hits that one routing difference moves it by ~4 %). The live stack (engines +
 * gateway, in this process) measured by the bench client must agree with `simulate` on TTFT
 * p50 and p99 and the hit rate within 15 % per policy, and rank the policies alike.
 * `npm run demo` runs the full-size version with separate processes.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { agreement, compareLiveSim, formatCompare } from '../src/bench/compare.ts';
import { DEFAULT_ENGINE } from '../src/sim/run.ts';

test('bench through a live stack agrees with the simulator', { timeout: 150_000 }, async (t) => {
  const rows = await compareLiveSim({
    workload: { kind: 'synthetic', name: 'hot', ratePerS: 4 },
    seed: 1,
    durationS: 24,
    warmupS: 2.4,
    replicas: 4,
    policies: ['cost', 'random'],
    speedup: 1,
    engine: DEFAULT_ENGINE,
    mode: 'inprocess',
  });
  const table = formatCompare(rows);
  t.diagnostic(`\n${table}`);
  const a = agreement(rows, 0.15);
  assert.ok(a.ok, table);
  assert.deepEqual(a.liveRanking, ['cost', 'random']);
});
