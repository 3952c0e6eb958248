/**
 * The claim checks of `src/router/audit/claims.ts` and how the audit counts them: a reported
 * count clamped to the prompt (1e308 keeps every counter finite), a claimed hit refuted by its
 * speed, an index overflowing the replica's pool, the window and threshold of a pool's size, and
 * no count-only over-prediction on a small pool.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  CacheAudit,
  clampReported,
  exceedsPool,
  MIN_POWER_RATIO,
  poolBoundBlocks,
  REFUTE_FRACTION,
  smallPool,
  speedEvidenceOf,
  testClaimSpeed,
  windowForPool,
} from '../../src/router/audit/index.ts';

const BLOCK = 16;
const SEED = { seed: 54, numRuns: 300 };

describe('claim checks', () => {
  test('clampReported: [0, prompt]; non-finite is malformed', () => {
    assert.deepEqual(clampReported(1e308, 1000), { tokens: 1000, clamped: true });
    assert.deepEqual(clampReported(1200, 1000), { tokens: 1000, clamped: true });
    assert.deepEqual(clampReported(-5, 1000), { tokens: 0, clamped: true });
    assert.deepEqual(clampReported(512, 1000), { tokens: 512, clamped: false });
    assert.equal(clampReported(Number.POSITIVE_INFINITY, 1000), null);
    assert.equal(clampReported(Number.NaN, 1000), null);
    fc.assert(
      fc.property(fc.double(), fc.integer({ min: 0, max: 1 << 20 }), (reported, prompt) => {
        const c = clampReported(reported, prompt);
        if (!Number.isFinite(reported)) return c === null;
        return c !== null && c.tokens >= 0 && c.tokens <= prompt && Number.isFinite(c.tokens);
      }),
      SEED,
    );
  });

  test('speedEvidenceOf: cold is the whole prompt, warm what the claim leaves; claims clamped', () => {
    assert.deepEqual(speedEvidenceOf(0.5, 4096, 4080, 900), {
      ttftMs: 900,
      coldMs: 2048,
      warmMs: 8,
    });
    assert.deepEqual(speedEvidenceOf(0.5, 100, 1e308, 1), { ttftMs: 1, coldMs: 50, warmMs: 0 });
    assert.deepEqual(speedEvidenceOf(0.5, 100, -3, 1), { ttftMs: 1, coldMs: 50, warmMs: 50 });
    // No claim: warm is cold, so the test has no power.
    assert.equal(testClaimSpeed(speedEvidenceOf(0.5, 4096, 0, 5000)), 'untested');
    assert.equal(testClaimSpeed(speedEvidenceOf(0.5, 4096, 4096, 2000)), 'refuted');
    assert.equal(testClaimSpeed(speedEvidenceOf(0.5, 4096, 4096, 100)), 'consistent');
  });

  test('testClaimSpeed: refuted at 0.75 x cold, untested without power', () => {
    assert.equal(testClaimSpeed({ ttftMs: 75, coldMs: 100, warmMs: 5 }), 'refuted');
    assert.equal(testClaimSpeed({ ttftMs: 74, coldMs: 100, warmMs: 5 }), 'consistent');
    assert.equal(testClaimSpeed({ ttftMs: 500, coldMs: 100, warmMs: 30 }), 'untested');
    assert.equal(testClaimSpeed({ ttftMs: Number.NaN, coldMs: 100, warmMs: 5 }), 'untested');
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 1e6, noNaN: true }),
        fc.double({ min: 0.001, max: 1e6, noNaN: true }),
        fc.double({ min: 0, max: 1e6, noNaN: true }),
        (ttftMs, coldMs, warmMs) => {
          const r = testClaimSpeed({ ttftMs, coldMs, warmMs });
          if (coldMs < MIN_POWER_RATIO * warmMs) return r === 'untested';
          // A response as fast as the claim implies (warm, or anything under the cut) passes.
          if (ttftMs < REFUTE_FRACTION * coldMs) return r === 'consistent';
          return r === 'refuted';
        },
      ),
      SEED,
    );
    // Monotone: slower never turns a refutation into consistency.
    fc.assert(
      fc.property(
        fc.double({ min: 0, max: 1e4, noNaN: true }),
        fc.double({ min: 0, max: 1e4, noNaN: true }),
        fc.double({ min: 1, max: 1e4, noNaN: true }),
        (a, b, coldMs) => {
          const warmMs = coldMs / 10;
          const [fast, slow] = a <= b ? [a, b] : [b, a];
          const rf = testClaimSpeed({ ttftMs: fast, coldMs, warmMs });
          const rs = testClaimSpeed({ ttftMs: slow, coldMs, warmMs });
          return !(rf === 'refuted' && rs === 'consistent');
        },
      ),
      SEED,
    );
  });

  test('pool bound: pool + max(1, pool / 16)', () => {
    assert.equal(poolBoundBlocks(64), 68);
    assert.equal(poolBoundBlocks(8), 9);
    assert.equal(exceedsPool(68, 64), false);
    assert.equal(exceedsPool(69, 64), true);
    assert.equal(exceedsPool(1e9, 0), false, 'an unknown pool bounds nothing');
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1 << 20 }), fc.nat(1 << 21), (pool, held) => {
        // An honest index never holds more than the pool: never flagged.
        return held > pool || !exceedsPool(held, pool);
      }),
      SEED,
    );
  });

  test('window and small pool from the pool size', () => {
    assert.equal(windowForPool(64), 32);
    assert.equal(windowForPool(4096), 64);
    assert.equal(windowForPool(34_882), 128);
    assert.equal(smallPool(64, 136, BLOCK), true);
    assert.equal(smallPool(34_882, 4096, BLOCK), false);
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1 << 24 }), (pool) => {
        const n = windowForPool(pool);
        return n >= 32 && n <= 128 && Number.isInteger(n);
      }),
      SEED,
    );
  });
});

describe('the audit with evidence', () => {
  test('a reported 1e308 (or more than the prompt) is clamped; counters stay finite', () => {
    const audit = new CacheAudit({ blockSize: BLOCK });
    for (let i = 0; i < 40; i++) {
      audit.record('a', { predictedTokens: 1024, reportedTokens: 1e308, promptTokens: 1024 });
      audit.record('a', { predictedTokens: 1024, reportedTokens: 5000, promptTokens: 1024 });
    }
    audit.record('a', { predictedTokens: 0, reportedTokens: Number.NaN, promptTokens: 1024 });
    const s = audit.state('a');
    assert.ok(Number.isFinite(s.reportedTokens));
    assert.equal(s.reportedTokens, s.promptTokens);
    assert.equal(s.verdict, 'ok');
    assert.equal(s.evidence.clamped, 80);
    assert.equal(s.evidence.malformed, 1);
  });

  test('a consistent liar (prediction = claim = prompt) is flagged by its speed', () => {
    const audit = new CacheAudit({ blockSize: BLOCK });
    let flaggedAt = 0;
    for (let i = 1; i <= 60 && flaggedAt === 0; i++) {
      const c = audit.record('liar', {
        predictedTokens: 2048,
        reportedTokens: 2048,
        promptTokens: 2048,
        evidence: { poolBlocks: 34_882, speed: { ttftMs: 200, coldMs: 210, warmMs: 4 } },
      });
      if (c.verdict === 'over-predicts') flaggedAt = i;
    }
    assert.ok(flaggedAt > 0 && flaggedAt <= 60, `flagged at ${flaggedAt}`);
    assert.ok(audit.state('liar').evidence.refuted >= audit.state('liar').window.threshold);
    // The same claims, fast: never flagged.
    const honest = new CacheAudit({ blockSize: BLOCK });
    for (let i = 0; i < 200; i++) {
      honest.record('h', {
        predictedTokens: 2048,
        reportedTokens: 2048,
        promptTokens: 2048,
        evidence: { poolBlocks: 34_882, speed: { ttftMs: 6, coldMs: 210, warmMs: 4 } },
      });
    }
    assert.equal(honest.verdict('h'), 'ok');
  });

  test('an index past the pool bound is flagged at once; a small pool churning is not', () => {
    const audit = new CacheAudit({ blockSize: BLOCK });
    const sample = { predictedTokens: 128, reportedTokens: 0, promptTokens: 136 };
    for (let i = 0; i < 100; i++) {
      // Over-predicted every time, but on a 64-block pool: churn, not a fault.
      audit.record('small', { ...sample, evidence: { poolBlocks: 64, indexedBlocks: 64 } });
    }
    assert.equal(audit.verdict('small'), 'ok');
    const c = audit.record('small', { ...sample, evidence: { poolBlocks: 64, indexedBlocks: 69 } });
    assert.equal(c.verdict, 'over-predicts');
    assert.equal(c.cause, 'pool-overflow');
    assert.equal(audit.state('small').evidence.poolOverflow, true);
  });

  test("a replica's window follows its pool: 64 blocks 32 (k 13), 34,882 blocks 128", () => {
    const audit = new CacheAudit({ blockSize: BLOCK });
    const s = { predictedTokens: 0, reportedTokens: 0, promptTokens: 100 };
    audit.record('small', { ...s, evidence: { poolBlocks: 64 } });
    audit.record('big', { ...s, evidence: { poolBlocks: 34_882 } });
    audit.record('unknown', s);
    assert.deepEqual(
      [audit.state('small').window.size, audit.state('small').window.threshold],
      [32, 13],
    );
    assert.equal(audit.state('big').window.size, 128);
    assert.ok(audit.state('big').window.threshold < 128 * 0.25);
    assert.equal(audit.state('unknown').window.size, 32);
  });
});
