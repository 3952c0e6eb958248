/**
 * `delay-cost` against the seed's `cost` at the knee, through the simulator: SGLang's
 * shared-prefix groups (64 x 2,048-token system prompts) at 40 req/s on 3 replicas, where each
 * replica runs close to its 64 sequence slots. Two simulated minutes, about a second each.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { simulate } from '../../src/sim/run.ts';
import { smallSeedConfig } from '../support/sim.ts';

const run = (policy: string) =>
  simulate(
    smallSeedConfig(
      {
        workload: { kind: 'synthetic', name: 'groups', ratePerS: 40 },
        replicas: 3,
        durationMs: 120_000,
        warmupMs: 20_000,
      },
      policy,
    ),
  );

test('groups on 3 replicas: delay-cost meets a 2 s TTFT p99 that cost misses', () => {
  const cost = run('cost');
  const delay = run('delay-cost');
  assert.equal(delay.errors, 0);
  assert.ok(cost.ttftMs.p99 > 2_000, `cost TTFT p99 ${cost.ttftMs.p99}`);
  assert.ok(delay.ttftMs.p99 < 1_000, `delay-cost TTFT p99 ${delay.ttftMs.p99}`);
  assert.ok(
    delay.tpotMs.p99 <= cost.tpotMs.p99 * 1.05,
    `TPOT ${delay.tpotMs.p99} vs ${cost.tpotMs.p99}`,
  );
  // Fewer cold prefills: each of cost's extra spills re-prefills a 2,048-token system prompt.
  assert.ok(
    delay.router.spills! < cost.router.spills!,
    `spills ${delay.router.spills} vs ${cost.router.spills}`,
  );
  assert.deepEqual(run('delay-cost').ttftMs, delay.ttftMs, 'deterministic');
});
