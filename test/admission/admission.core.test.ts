/** The admission core on a hand-driven clock: token bucket, tenant limits, the fleet bound. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { queueBoundVerdict } from '../../src/admission/queueBound.ts';
import {
  CONCURRENCY_RETRY_MS,
  type TenantLimits,
  TenantLimiter,
} from '../../src/admission/tenantLimits.ts';
import { TokenBucket } from '../../src/admission/tokenBucket.ts';

const limits = (l: Partial<TenantLimits>): TenantLimits => ({
  requestsPerS: null,
  burst: null,
  concurrent: null,
  promptTokensPerMin: null,
  ...l,
});

describe('TokenBucket', () => {
  test('starts full, refills at its rate, never above capacity', () => {
    const b = new TokenBucket(2, 4, 0);
    for (let i = 0; i < 4; i++) {
      assert.equal(b.waitMs(1, 0), 0);
      b.take(1, 0);
    }
    assert.equal(b.waitMs(1, 0), 500, 'one token at 2/s is 500 ms away');
    assert.equal(b.waitMs(1, 500), 0);
    assert.equal(b.level(100_000), 4);
  });

  test('a take larger than the capacity waits for a full bucket, then leaves a debt', () => {
    const b = new TokenBucket(10, 100, 0);
    b.take(50, 0);
    assert.equal(b.waitMs(300, 0), 5000, 'needs the bucket full: 50 more tokens at 10/s');
    assert.equal(b.waitMs(300, 5000), 0);
    b.take(300, 5000);
    assert.equal(b.level(5000), -200);
    assert.equal(b.waitMs(1, 5000), 20_100);
  });

  test('rejects a zero or negative rate and capacity', () => {
    assert.throws(() => new TokenBucket(0, 1, 0), RangeError);
    assert.throws(() => new TokenBucket(1, -1, 0), RangeError);
  });

  test('property: over any window, takes never exceed capacity + rate x time', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 0.1, max: 100, noNaN: true }),
        fc.integer({ min: 1, max: 50 }),
        fc.array(fc.integer({ min: 0, max: 2000 }), { minLength: 1, maxLength: 200 }),
        (rate, capacity, gapsMs) => {
          const b = new TokenBucket(rate, capacity, 0);
          let nowMs = 0;
          let taken = 0;
          for (const gap of gapsMs) {
            nowMs += gap;
            if (b.waitMs(1, nowMs) === 0) {
              b.take(1, nowMs);
              taken++;
            }
          }
          return taken <= capacity + (rate * nowMs) / 1000 + 1e-9;
        },
      ),
    );
  });
});

describe('TenantLimiter', () => {
  test('requests per second: a burst, then 429s with the time to the next token', () => {
    const limiter = new TenantLimiter({ acme: limits({ requestsPerS: 2, burst: 2 }) });
    assert.equal(limiter.admit('acme', 10, 0).admitted, true);
    assert.equal(limiter.admit('acme', 10, 0).admitted, true);
    const refused = limiter.admit('acme', 10, 0);
    assert.equal(refused.admitted, false);
    assert.ok(!refused.admitted);
    assert.equal(refused.limit, 'requests_per_second');
    assert.equal(refused.retryAfterMs, 500);
    assert.equal(limiter.admit('acme', 10, 500).admitted, true);
  });

  test('another tenant, a tenant without limits and no tenant are not held back', () => {
    const limiter = new TenantLimiter({
      acme: limits({ requestsPerS: 1, burst: 1 }),
      beta: limits({ requestsPerS: 1, burst: 1 }),
    });
    assert.equal(limiter.admit('acme', 1, 0).admitted, true);
    assert.equal(limiter.admit('acme', 1, 0).admitted, false);
    assert.equal(limiter.admit('beta', 1, 0).admitted, true);
    for (let i = 0; i < 100; i++) {
      assert.equal(limiter.admit('other', 1, 0).admitted, true);
      assert.equal(limiter.admit(null, 1, 0).admitted, true);
    }
  });

  test('concurrency: a slot frees when a request ends, released once only', () => {
    const limiter = new TenantLimiter({ acme: limits({ concurrent: 2 }) });
    const a = limiter.admit('acme', 1, 0);
    const b = limiter.admit('acme', 1, 0);
    assert.ok(a.admitted && b.admitted);
    const c = limiter.admit('acme', 1, 0);
    assert.ok(!c.admitted);
    assert.equal(c.limit, 'concurrent_requests');
    assert.equal(c.retryAfterMs, CONCURRENCY_RETRY_MS);
    a.release();
    a.release();
    assert.equal(limiter.inFlight('acme'), 1);
    assert.equal(limiter.admit('acme', 1, 0).admitted, true);
    assert.equal(limiter.admit('acme', 1, 0).admitted, false);
  });

  test('prompt tokens per minute refill continuously; a refusal takes from no limit', () => {
    const limiter = new TenantLimiter({
      acme: limits({ promptTokensPerMin: 6000, requestsPerS: 100, burst: 2 }),
    });
    assert.equal(limiter.admit('acme', 6000, 0).admitted, true);
    const refused = limiter.admit('acme', 600, 0);
    assert.ok(!refused.admitted);
    assert.equal(refused.limit, 'prompt_tokens_per_minute');
    assert.equal(refused.retryAfterMs, 6000, '600 tokens at 100 tokens/s');
    // The refused request took no request token: the burst of 2 still has one left.
    assert.equal(limiter.admit('acme', 600, 6000).admitted, true);
  });
});

describe('queueBoundVerdict', () => {
  const us = 71.3;
  test('admits while one eligible replica is under the bound', () => {
    const v = queueBoundVerdict(
      [
        { queuedPromptTokens: 40_000, eligible: true },
        { queuedPromptTokens: 4_000, eligible: true },
      ],
      us,
      300,
    );
    assert.equal(v.admitted, true);
    assert.equal(v.shortestQueueMs, (4000 * us) / 1000);
  });

  test('refuses when every eligible replica is past it; retry when the shortest drains', () => {
    const v = queueBoundVerdict(
      [
        { queuedPromptTokens: 16_000, eligible: true },
        { queuedPromptTokens: 0, eligible: false },
      ],
      us,
      570,
    );
    assert.ok(!v.admitted);
    assert.ok(Math.abs(v.retryAfterMs - (16_000 * us) / 1000 + 570) < 1e-9);
  });

  test('no eligible replica: the healthy ones count (the router fails open to them)', () => {
    const replicas = [
      { queuedPromptTokens: 100, eligible: false },
      { queuedPromptTokens: 50_000, eligible: false },
    ];
    assert.equal(queueBoundVerdict(replicas, us, 100).admitted, true);
    assert.equal(queueBoundVerdict([], us, 100).admitted, true);
  });
});
