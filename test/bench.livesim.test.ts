/**
 * Live versus simulated, small: the router seed's hot-customer workload at a tenth of its rate
 * on 4 replicas, 48 s of workload time at speedup 1, cost against random. The live stack (engines
 * + gateway, in this process) measured by the bench client must agree with `simulate` on TTFT
 * p50 and p99 within 15 % per policy, on the hit rate within 15 % or 5 points, and rank the
 * policies alike. About 200 requests are measured and most customers come once, so hit rates
 * are low (~23 % for cost) and each request routed differently moves one by ~0.4 points; at 24 s
 * (100 requests, 16 %) the live stack's timing alone moved cost's by up to 4.7 points.
 * `npm run demo` runs the full-size version with separate processes.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  agreement,
  type CompareRow,
  compareLiveSim,
  formatCompare,
} from '../src/loadgen/compare.ts';
import { ENGINE_DEFAULTS } from '../src/engine/options.ts';

test('bench through a live stack agrees with the simulator', { timeout: 240_000 }, async (t) => {
  const rows = await compareLiveSim({
    workload: { kind: 'synthetic', name: 'hot', ratePerS: 4 },
    seed: 1,
    durationS: 48,
    warmupS: 4.8,
    replicas: 4,
    policies: ['cost', 'random'],
    speedup: 1,
    engine: ENGINE_DEFAULTS,
    mode: 'inprocess',
  });
  const table = formatCompare(rows);
  t.diagnostic(`\n${table}`);
  const a = agreement(rows, 0.15, 0.05);
  assert.ok(a.ok, table);
  assert.deepEqual(a.liveRanking, ['cost', 'random']);
});

test('agreement: relative tolerance everywhere, absolute slack only for the hit rate', () => {
  const row = (simHit: number, liveHit: number, liveP99 = 1000): CompareRow =>
    ({
      policy: 'cost',
      sim: { ttftMs: { p50: 100, p99: 1000 }, hitRate: simHit },
      live: { ttftMs: { p50: 100, p99: liveP99 }, hitRate: liveHit, errors: 0 },
    }) as unknown as CompareRow;
  assert.equal(agreement([row(0.6, 0.66)]).ok, true); // 10 %
  assert.equal(agreement([row(0.16, 0.2)]).ok, false); // 25 %, no slack
  assert.equal(agreement([row(0.16, 0.2)], 0.15, 0.05).ok, true); // 4 points
  assert.equal(agreement([row(0.16, 0.22)], 0.15, 0.05).ok, false); // 6 points
  assert.equal(agreement([row(0.16, 0.16, 1300)], 0.15, 0.5).ok, false); // slack is not for TTFT
});
