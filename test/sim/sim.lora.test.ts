/**
 * The lora workload through the simulator: engines with LoRA on (max_loras 2), the adapter-aware
 * cost against the same rule blind to adapters, on a small bounded run (the seed's load per
 * replica on 5 replicas, 3 adapters).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ENGINE_DEFAULTS } from '../../src/engine/options.ts';
import { simulate } from '../../src/sim/run.ts';
import { smallSeedConfig } from '../support/sim.ts';

const lora = (policy: string, loraBlind = false) =>
  simulate(
    smallSeedConfig(
      {
        workload: { kind: 'synthetic', name: 'lora', ratePerS: 8, adapters: 3 },
        engine: { ...ENGINE_DEFAULTS, lora: { maxLoras: 2 } },
        durationMs: 60_000,
        warmupMs: 20_000,
        router: { policy, index: 'events', queueSource: 'ledger', loraBlind },
      },
      policy,
    ),
  );

test('lora workload: the adapter-aware cost beats the LoRA-blind one on TTFT p99, deterministically', () => {
  const aware = lora('cost');
  const blind = lora('cost', true);
  assert.equal(aware.policy, 'cost');
  assert.equal(blind.policy, 'cost/lora-blind');
  assert.equal(aware.errors, 0);
  assert.equal(blind.errors, 0);
  assert.ok(
    2 * aware.ttftMs.p99 < blind.ttftMs.p99,
    `aware ${aware.ttftMs.p99} ms vs blind ${blind.ttftMs.p99} ms`,
  );
  assert.deepEqual(lora('cost'), aware, 'the same seed gives the same run');
});
