/**
 * One default prefill cost: delay-cost's time scale and the gateway's admission bounds read the
 * same constant (router/defaults.ts), and it is the router seed's figure, which the model
 * catalog computes for the seed replica.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { defaultAdmission } from '../../src/serving/admissionConfig.ts';
import { makeReplicaSpec, prefillUsPerToken } from '../../src/model/index.ts';
import { DEFAULT_PREFILL_US_PER_TOKEN } from '../../src/router/defaults.ts';
import { DelayCostPolicy } from '../../src/router/policies/delayCost.ts';
import { Rng } from '../../src/util/rng.ts';
import { BLOCK, replicaView } from '../support/routing.ts';

test('the default prefill cost is the seed figure, 71.3 us, held to the catalog', () => {
  // The seed: 2 x 70.55e9 FLOP / (2 x 1979e12 FLOP/s x 0.50) = 71.299 us per token.
  const seedUs = ((2 * 70.55e9) / (2 * 1979e12 * 0.5)) * 1e6;
  assert.equal(DEFAULT_PREFILL_US_PER_TOKEN, 71.3);
  assert.equal(Math.round(seedUs * 10) / 10, DEFAULT_PREFILL_US_PER_TOKEN);
  // The catalog's seed replica computes the same figure: a change there shows here.
  const catalogUs = prefillUsPerToken(makeReplicaSpec());
  assert.ok(Math.abs(catalogUs - DEFAULT_PREFILL_US_PER_TOKEN) < 0.05, `${catalogUs}`);
});

test('delay-cost and the admission bounds read the one default', () => {
  assert.equal(defaultAdmission().prefillUsPerToken, DEFAULT_PREFILL_US_PER_TOKEN);
  const policy = new DelayCostPolicy();
  assert.equal(policy.prefillMsPerToken, DEFAULT_PREFILL_US_PER_TOKEN / 1000);
  // A score in ms: 1,000 queued + 8,000 uncached tokens at 71.3 us = 641.7 ms.
  const { scores } = policy.pick({
    request: { id: 'q', blockKeys: [], promptTokens: 8_000, blockSize: BLOCK },
    nowMs: 0,
    candidates: [replicaView(0, { queuedPromptTokens: 1_000 })],
    fleet: ['r0'],
    fleetVersion: 1,
    rng: new Rng(1),
  });
  assert.ok(scores);
  assert.ok(Math.abs(scores[0]! - 641.7) < 1e-9, `${scores[0]}`);
});
