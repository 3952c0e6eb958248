/** `kvroute plan --pd`: the seed's load split between a prefill pool and a decode pool. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SEED_LOAD } from '../../src/model/plan.ts';
import { planPd, SEED_PD } from '../../src/model/pdPlan.ts';
import { makeReplicaSpec } from '../../src/model/spec.ts';

const spec = makeReplicaSpec();

test('plan --pd on the seed: demands apart, transfer, counts', () => {
  const p = planPd(spec, SEED_LOAD, SEED_PD);
  // The router seed's affinity prefill (7.42) and decode (6.29) demands, now two pools.
  assert.equal(Math.round(p.prefillReplicaSeconds * 100) / 100, 7.42);
  assert.equal(Math.round(p.decodeReplicaSeconds * 100) / 100, 6.29);
  assert.deepEqual(p.aggregated, { replicas: 22, gpus: 44 });
  assert.deepEqual(p.disaggregated, { prefill: 12, decode: 10, gpus: 44 });
  // 8,000 tokens x 327,680 B; 2,000 uncached tokens when the decode pool holds the prefix.
  assert.equal(p.transferBytesPerRequest, 8000 * 327_680);
  assert.equal(p.transferBytesWarm, 2000 * 327_680);
  assert.equal(Math.round(p.linkMs * 10) / 10, 105.9);
  // 2,048-token budget: 1,984 prompt tokens x 71.3 us (compute-bound) vs the 33.5 ms decode step.
  assert.equal(Math.round(p.decodeStepMs * 10) / 10, 33.5);
  assert.ok(p.mixedStepMs > 140 && p.mixedStepMs < 150);
  assert.equal(p.verdict, 'disaggregate');
});

test('plan --pd: the verdict moves with the TPOT target and the budget', () => {
  assert.equal(planPd(spec, SEED_LOAD, { ...SEED_PD, tpotSloMs: 200 }).verdict, 'aggregate');
  assert.equal(planPd(spec, SEED_LOAD, { ...SEED_PD, tpotSloMs: 25 }).verdict, 'neither');
  const small = planPd(spec, SEED_LOAD, { ...SEED_PD, budgetTokens: 256 });
  assert.equal(small.verdict, 'aggregate');
  const fast = planPd(spec, SEED_LOAD, { ...SEED_PD, transferGbps: 100 });
  assert.ok(fast.linkMs < 30);
});
