import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  type AuditSample,
  binomialTail,
  CacheAudit,
  classify,
  thresholdFor,
} from '../../src/router/audit/index.ts';
import { computeBlockKeys } from '../../src/kv/blockKey.ts';
import type { KvEvent } from '../../src/kv/events.ts';
import { Router } from '../../src/router/index.ts';
import { Rng } from '../../src/util/rng.ts';

const BLOCK = 16;

/** A request as a healthy replica answers it: the prediction right up to rounding. */
function healthySample(rng: Rng, mismatchRate: number): AuditSample {
  const promptTokens = 64 + rng.int(4000);
  const cachedBlocks = rng.int(Math.floor(promptTokens / BLOCK) + 1);
  const reportedTokens = cachedBlocks * BLOCK;
  // The router's prediction is off by at most one block (the engine's last-token recompute).
  let predictedTokens = Math.min(promptTokens, reportedTokens + (rng.next() < 0.5 ? BLOCK : 0));
  if (rng.next() < mismatchRate) {
    // A healthy miss: an eviction between route and admission, or a race with its own prefix.
    predictedTokens = rng.next() < 0.5 ? promptTokens : 0;
  }
  return { predictedTokens, reportedTokens, promptTokens };
}

/** A request on a faulty replica: every prediction wrong in the fault's direction. */
function faultySample(rng: Rng, kind: 'over' | 'under'): AuditSample {
  const promptTokens = 512 + rng.int(4000);
  const held = BLOCK * rng.int(Math.floor(promptTokens / BLOCK / 4));
  return kind === 'over'
    ? { predictedTokens: promptTokens, reportedTokens: held, promptTokens }
    : { predictedTokens: held, reportedTokens: promptTokens - 1, promptTokens };
}

describe('audit bound', () => {
  test('binomial tail matches a direct sum and the defaults give k = 13 of 32', () => {
    let direct = 0;
    for (let i = 3; i <= 5; i++) {
      const c = [1, 5, 10, 10, 5, 1][i]!;
      direct += c * 0.3 ** i * 0.7 ** (5 - i);
    }
    assert.ok(Math.abs(binomialTail(5, 0.3, 3) - direct) < 1e-12);
    assert.equal(binomialTail(5, 0.3, 0), 1);
    assert.equal(binomialTail(5, 0.3, 6), 0);
    assert.equal(thresholdFor(32, 0.05, 1e-8), 13);
    const audit = new CacheAudit({ blockSize: BLOCK });
    assert.equal(audit.threshold, 13);
    assert.ok(audit.bound.falseAlarmPerJudgment <= 1e-8);
    assert.ok(binomialTail(32, 0.05, 12) > 1e-8, 'the threshold is the smallest that meets alpha');
  });

  test('classify: within a block or 10 % of the prompt is no miss', () => {
    assert.equal(
      classify({ predictedTokens: 1024, reportedTokens: 1008, promptTokens: 1025 }, BLOCK),
      0,
    );
    assert.equal(
      classify({ predictedTokens: 1024, reportedTokens: 0, promptTokens: 1025 }, BLOCK),
      1,
    );
    assert.equal(
      classify({ predictedTokens: 0, reportedTokens: 512, promptTokens: 1025 }, BLOCK),
      -1,
    );
    assert.equal(
      classify({ predictedTokens: 100, reportedTokens: 0, promptTokens: 1025 }, BLOCK),
      0,
    );
  });
});

describe('audit verdicts (properties)', () => {
  test('no false alarm on a faultless random trace of 10,000 requests', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 31 - 1 }),
        fc.double({ min: 0, max: 0.05, noNaN: true }),
        fc.integer({ min: 1, max: 4 }),
        (seed, rate, replicas) => {
          const rng = new Rng(seed);
          const audit = new CacheAudit({ blockSize: BLOCK });
          for (let i = 0; i < 10_000; i++) {
            const replica = `r${rng.int(replicas)}`;
            const change = audit.record(replica, healthySample(rng, rate));
            if (change.verdict !== 'ok') return false;
          }
          return true;
        },
      ),
      { numRuns: 25, seed: 34 },
    );
  });

  for (const kind of ['over', 'under'] as const) {
    test(`a fault that ${kind}-predicts is flagged within the window, on that replica only`, () => {
      fc.assert(
        fc.property(
          fc.integer({ min: 0, max: 2 ** 31 - 1 }),
          fc.integer({ min: 0, max: 500 }),
          (seed, healthyBefore) => {
            const rng = new Rng(seed);
            const audit = new CacheAudit({ blockSize: BLOCK });
            for (let i = 0; i < healthyBefore; i++) {
              audit.record('bad', healthySample(rng, 0.05));
              audit.record('good', healthySample(rng, 0.05));
            }
            let flaggedAfter: number | null = null;
            for (let i = 1; i <= audit.windowRequests && flaggedAfter === null; i++) {
              const change = audit.record('bad', faultySample(rng, kind));
              audit.record('good', healthySample(rng, 0.05));
              if (change.verdict !== 'ok') {
                if (change.verdict !== `${kind}-predicts` || !change.changed) return false;
                flaggedAfter = i;
              }
            }
            return (
              flaggedAfter !== null &&
              flaggedAfter <= audit.threshold &&
              audit.verdict('good') === 'ok'
            );
          },
        ),
        { numRuns: 100, seed: 34 },
      );
    });
  }

  test('a fault missing half the time is flagged within two windows', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 - 1 }), (seed) => {
        const rng = new Rng(seed);
        const audit = new CacheAudit({ blockSize: BLOCK });
        for (let i = 0; i < 2 * audit.windowRequests; i++) {
          const s = rng.next() < 0.5 ? faultySample(rng, 'over') : healthySample(rng, 0);
          if (audit.record('r', s).verdict === 'over-predicts') return true;
        }
        return false;
      }),
      { numRuns: 200, seed: 34 },
    );
  });

  test('window sums and reset: a repaired replica starts ok with an empty window', () => {
    const audit = new CacheAudit({ blockSize: BLOCK, windowRequests: 4, threshold: 2 });
    for (let i = 0; i < 6; i++) {
      audit.record('r', { predictedTokens: 1000, reportedTokens: 0, promptTokens: 1100 });
    }
    const s = audit.state('r');
    assert.equal(s.verdict, 'over-predicts');
    assert.deepEqual(s.window, { requests: 4, size: 4, over: 4, under: 0, threshold: 2 });
    assert.equal(s.predictedTokens, 4000);
    assert.equal(s.reportedTokens, 0);
    assert.equal(s.judged, 6);
    audit.reset('r');
    assert.equal(audit.verdict('r'), 'ok');
    assert.equal(audit.state('r').window.requests, 0);
    const back = audit.record('r', {
      predictedTokens: 1000,
      reportedTokens: 992,
      promptTokens: 1100,
    });
    assert.deepEqual([back.verdict, back.changed], ['ok', false]);
  });
});

describe('approximate fallback for one replica', () => {
  const B = 4;
  const tokens = (n: number, base: number) => Array.from({ length: n }, (_, i) => base + i);
  const storedEvent = (toks: number[]): KvEvent =>
    ({
      type: 'BlockStored',
      blockKeys: computeBlockKeys(toks, B),
      parentKey: null,
      tokenIds: toks,
      blockSize: B,
    }) as unknown as KvEvent;

  test('distrusted replica: its events ignored, its routes recorded within its capacity; the other untouched', () => {
    const router = new Router({ replicas: ['a', 'b'], overlayTtlMs: 0, policy: 'cost' });
    const p1 = tokens(16, 1);
    const p2 = tokens(16, 100);
    router.applyEvents('a', [storedEvent(p1)], 0);
    router.applyEvents('b', [storedEvent(p2)], 0);
    router.distrustEvents('a', 4);
    assert.equal(router.indexSourceOf('a'), 'approx');
    assert.equal(router.indexSourceOf('b'), 'events');
    const snap = () =>
      Object.fromEntries(router.snapshot().replicas.map((r) => [r.name, r.indexedBlocks]));
    assert.deepEqual(snap(), { a: 0, b: 4 });
    // Events for a are not believed now.
    router.applyEvents('a', [storedEvent(p1)], 1);
    assert.deepEqual(snap(), { a: 0, b: 4 });
    // b still matches p2 by its events.
    const d2 = router.route(
      { id: 'x', blockKeys: computeBlockKeys(p2, B), promptTokens: 16, blockSize: B },
      2,
    );
    assert.equal(d2.replica, 'b');
    assert.equal(d2.cachedTokens, 16);
    router.onFinished('x', 3);
    // A route to a is recorded (4 blocks, its capacity) and predicted next time.
    const p3 = tokens(16, 200);
    const avoidB = { avoid: ['b'] };
    const d3 = router.route(
      { id: 'y', blockKeys: computeBlockKeys(p3, B), promptTokens: 16, blockSize: B, ...avoidB },
      4,
    );
    assert.equal(d3.replica, 'a');
    router.onFinished('y', 5);
    assert.deepEqual(snap(), { a: 4, b: 4 });
    const again = router.route(
      { id: 'z', blockKeys: computeBlockKeys(p3, B), promptTokens: 16, blockSize: B },
      6,
    );
    assert.deepEqual([again.replica, again.cachedTokens], ['a', 16]);
    router.onFinished('z', 7);
    // A longer prompt pushes the oldest blocks out (LRU within 4 blocks).
    const p4 = tokens(24, 300);
    router.route(
      { id: 'w', blockKeys: computeBlockKeys(p4, B), promptTokens: 24, blockSize: B, ...avoidB },
      8,
    );
    assert.equal(snap().a, 4);
    // Trusted again: cleared, and its events count once more.
    router.trustEvents('a');
    assert.equal(router.indexSourceOf('a'), 'events');
    assert.equal(snap().a, 0);
    router.applyEvents('a', [storedEvent(p1)], 9);
    assert.equal(snap().a, 4);
  });
});
