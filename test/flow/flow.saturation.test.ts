/** The saturation detector: saturated when no replica has good capacity (llm-d's rule). */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  DEFAULT_SATURATION_LIMITS,
  hasGoodCapacity,
  isPoolSaturated,
  type ReplicaLoad,
} from '../../src/flow/saturation.ts';

const idle: ReplicaLoad = {
  eligible: true,
  waitingRequests: 0,
  kvUsage: 0.1,
  queuedPromptTokens: 0,
  queuedPrefillMs: 0,
};

describe('isPoolSaturated', () => {
  test('an empty pool is saturated; one replica with room is enough', () => {
    assert.equal(isPoolSaturated({ replicas: [] }, DEFAULT_SATURATION_LIMITS), true);
    const full = { ...idle, waitingRequests: 6 };
    assert.equal(isPoolSaturated({ replicas: [full, full] }, DEFAULT_SATURATION_LIMITS), true);
    assert.equal(isPoolSaturated({ replicas: [full, idle] }, DEFAULT_SATURATION_LIMITS), false);
  });

  test('each signal, at and over its limit; an ineligible replica has no capacity', () => {
    const limits = {
      maxWaitingRequests: 5,
      maxKvUsage: 0.8,
      maxQueuedPromptTokens: 8000,
      maxQueuedPrefillMs: 500,
    };
    assert.equal(hasGoodCapacity({ ...idle, waitingRequests: 5 }, limits), true);
    assert.equal(hasGoodCapacity({ ...idle, waitingRequests: 6 }, limits), false);
    assert.equal(hasGoodCapacity({ ...idle, kvUsage: 0.8 }, limits), true);
    assert.equal(hasGoodCapacity({ ...idle, kvUsage: 0.81 }, limits), false);
    assert.equal(hasGoodCapacity({ ...idle, queuedPromptTokens: 8001 }, limits), false);
    assert.equal(hasGoodCapacity({ ...idle, queuedPrefillMs: 501 }, limits), false);
    assert.equal(hasGoodCapacity({ ...idle, eligible: false }, limits), false);
  });

  test('a limit left out or a signal not reported is not checked', () => {
    assert.equal(hasGoodCapacity({ eligible: true, queuedPrefillMs: 1e9 }, {}), true);
    assert.equal(hasGoodCapacity({ eligible: true }, { maxKvUsage: 0.5 }), true);
  });

  test('property: saturated exactly when every replica is over some limit or ineligible', () => {
    const replica = fc.record({
      eligible: fc.boolean(),
      waitingRequests: fc.nat(10),
      kvUsage: fc.double({ min: 0, max: 1, noNaN: true }),
      queuedPrefillMs: fc.nat(2000),
    });
    fc.assert(
      fc.property(fc.array(replica, { maxLength: 8 }), (replicas) => {
        const limits = { maxWaitingRequests: 5, maxKvUsage: 0.8, maxQueuedPrefillMs: 1000 };
        const over = (r: (typeof replicas)[number]) =>
          !r.eligible || r.waitingRequests > 5 || r.kvUsage > 0.8 || r.queuedPrefillMs > 1000;
        assert.equal(isPoolSaturated({ replicas }, limits), replicas.every(over));
      }),
    );
  });
});
