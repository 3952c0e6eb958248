/** The seed's cost rule, the ledger behind it, and the guards in front of it. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { makePolicy, type PickInput, type ReplicaView, Router } from '../../src/router/index.ts';
import { Rng } from '../../src/util/rng.ts';
import { BLOCK, replicaView, request, stored, tokens } from '../support/routing.ts';

const SHARED = 6_000;
const UNIQUE = 2_000;

const shared = tokens(1, SHARED);
const hot = (i: number): number[] => shared.concat(tokens(100 + i, UNIQUE));

describe('cost = queued prompt tokens + uncached prompt tokens', () => {
  test('the owner keeps the prefix while its extra queue is under 6,000 tokens, not at 6,000', () => {
    const policy = makePolicy('cost');
    const view = (id: number, queued: number, cachedTokens: number): ReplicaView =>
      replicaView(id, { queuedPromptTokens: queued, cachedBlocks: cachedTokens / BLOCK });
    const pick = (ownerExtra: number, coldQueue = 1_000): number => {
      const input: PickInput = {
        request: { id: 'q', blockKeys: [], promptTokens: SHARED + UNIQUE, blockSize: BLOCK },
        nowMs: 0,
        candidates: [view(0, coldQueue + ownerExtra, SHARED), view(1, coldQueue, 0)],
        fleet: ['r0', 'r1'],
        fleetVersion: 1,
        rng: new Rng(1),
      };
      return policy.pick(input).replicaId;
    };
    assert.equal(pick(0), 0);
    assert.equal(pick(5_999), 0);
    assert.equal(pick(6_000), 1, 'equal cost goes to the shorter queue: the spill');
    assert.equal(pick(6_001), 1);
    assert.equal(pick(5_999, 0), 0);
  });

  test('a pick over fewer candidates than the last scores only its own', () => {
    const policy = makePolicy('cost');
    const input = (queues: number[]): PickInput => ({
      request: { id: 'q', blockKeys: [], promptTokens: 100, blockSize: BLOCK },
      nowMs: 0,
      candidates: queues.map((q, id) => replicaView(id, { queuedPromptTokens: q })),
      fleet: queues.map((_, id) => `r${id}`),
      fleetVersion: 1,
      rng: new Rng(1),
    });
    const wide = policy.pick(input([30, 10, 20]));
    assert.equal(wide.replicaId, 1);
    assert.deepEqual([...wide.scores!], [130, 110, 120]);
    const narrow = policy.pick(input([5, 7]));
    assert.equal(narrow.replicaId, 0);
    assert.deepEqual([...narrow.scores!], [105, 107]);
  });

  test('spill emerges: owner, owner, owner, then a second owner that is warm at once', () => {
    const router = new Router({ replicas: ['a', 'b'], policy: 'cost', seed: 9 });
    router.applyEvents('a', [stored(shared)], 0);
    // Each hot request adds its 2,000 uncached tokens to the owner's queue (no first tokens yet).
    const picks = [0, 1, 2, 3].map((i) => router.route(request(`h${i}`, hot(i)), 1));
    assert.deepEqual(
      picks.map((d) => d.replica),
      ['a', 'a', 'a', 'b'],
      'extra queue 0, 2,000, 4,000 keep the owner; 6,000 equals the saving and spills',
    );
    assert.deepEqual(
      picks.map((d) => d.cachedTokens),
      [SHARED, SHARED, SHARED, 0],
    );
    assert.equal(picks[3]!.spilled, true);
    assert.equal(picks[3]!.bestCachedTokens, SHARED);
    assert.equal(picks[3]!.uncachedTokens, SHARED + UNIQUE);
    // The spill warmed b (overlay, before any event): the next one finds two owners.
    const next = router.route(request('h4', hot(4)), 2);
    assert.equal(next.cachedTokens, SHARED);
    assert.equal(next.spilled, false);
    assert.equal(router.counters().spills, 1);
  });

  test('the ledger moves tokens at the first token and frees them at finish', () => {
    const router = new Router({ replicas: ['a'] });
    router.applyEvents('a', [stored(shared)], 0);
    router.route(request('x', hot(1)), 0);
    let a = router.snapshot().replicas[0]!;
    assert.equal(a.queuedPromptTokens, UNIQUE, 'uncached tokens at routing time');
    assert.equal(a.prefillRequests, 1);
    assert.equal(a.activePrefillBlocks, UNIQUE / BLOCK);
    router.onFirstToken('x', 5);
    a = router.snapshot().replicas[0]!;
    assert.equal(a.queuedPromptTokens, 0);
    assert.equal(a.decodeRequests, 1);
    assert.equal(a.activeDecodeBlocks, (SHARED + UNIQUE) / BLOCK);
    assert.equal(router.onFirstToken('x', 6), false, 'only once');
    router.onFinished('x', 9);
    a = router.snapshot().replicas[0]!;
    assert.equal(a.inFlight, 0);
    assert.equal(a.activeDecodeBlocks, 0);
    router.route(request('y', hot(2)), 10);
    router.onFinished('y', 11); // aborted before its first token
    assert.equal(router.snapshot().replicas[0]!.queuedPromptTokens, 0);
  });

  test('reports never reset the ledger', () => {
    const router = new Router({ replicas: ['a', 'b'] });
    router.route(request('x', tokens(5, 4_000)), 0);
    const owner = router.snapshot().replicas.find((r) => r.queuedPromptTokens > 0)!.name;
    router.onReport(owner, { kvUsage: 0.1, running: 0, waiting: 0, queuedPromptTokens: 0 }, 1);
    router.markDown(owner);
    router.markUp(owner);
    const after = router.snapshot(1).replicas.find((r) => r.name === owner)!;
    assert.equal(after.queuedPromptTokens, 4_000);
    assert.equal(after.reportedQueuedPromptTokens, 0);
  });
});

describe('guards', () => {
  const make = (): Router => new Router({ replicas: ['a', 'b', 'c'], seed: 2 });

  test('overfull, stale and unhealthy replicas are skipped', () => {
    const router = make();
    router.applyEvents('a', [stored(shared)], 0);
    router.applyEvents('b', [stored(shared)], 0);
    router.onReport('a', { kvUsage: 0.96, running: 1, waiting: 0 }, 1_000);
    router.onReport('b', { kvUsage: 0.5, running: 1, waiting: 0 }, 400);
    router.onReport('c', { kvUsage: 0.95, running: 1, waiting: 0 }, 1_000);
    const d = router.route(request('q', hot(0)), 1_000);
    assert.equal(d.replica, 'c', 'a is over 95 %, b is 600 ms stale; c at exactly 95 % is fine');
    assert.equal(d.failedOpen, false);
    assert.deepEqual(
      router.snapshot(1_000).replicas.map((r) => r.verdict),
      ['kv-full', 'stale', 'eligible'],
    );
    router.markDown('c');
    assert.equal(router.route(request('q2', hot(1)), 1_000).failedOpen, true);
  });

  test('custom thresholds', () => {
    const router = new Router({ replicas: ['a', 'b'], kvThreshold: 0.5, staleMs: 100, seed: 1 });
    router.onReport('a', { kvUsage: 0.6, running: 0, waiting: 0 }, 0);
    router.onReport('b', { kvUsage: 0.4, running: 0, waiting: 0 }, 0);
    assert.equal(router.route(request('q', tokens(2, 64)), 100).replica, 'b');
    assert.equal(router.route(request('q2', tokens(2, 64)), 101).failedOpen, true);
  });
});

describe('queueSource', () => {
  const burst = (queueSource: 'ledger' | 'reports'): Map<string, number> => {
    const replicas = ['a', 'b', 'c', 'd'];
    const router = new Router({
      replicas,
      policy: 'cost',
      policyOptions: { queueSource },
      overlayTtlMs: 0,
      seed: 4,
    });
    // One report says a is idle and the rest are busy; then 12 cold requests arrive before the next.
    router.onReport('a', { kvUsage: 0.2, running: 0, waiting: 0, queuedPromptTokens: 0 }, 0);
    for (const r of replicas.slice(1)) {
      router.onReport(r, { kvUsage: 0.2, running: 4, waiting: 1, queuedPromptTokens: 3_000 }, 0);
    }
    const counts = new Map<string, number>();
    for (let i = 0; i < 12; i++) {
      const d = router.route(request(`c${i}`, tokens(200 + i, 2_000)), 10 + i);
      counts.set(d.replica, (counts.get(d.replica) ?? 0) + 1);
    }
    return counts;
  };

  test("'reports' herds a burst onto the replica that looked idle", () => {
    assert.deepEqual([...burst('reports')], [['a', 12]]);
  });

  test("'ledger' spreads the same burst", () => {
    const counts = burst('ledger');
    assert.equal(counts.size, 4);
    for (const n of counts.values()) assert.equal(n, 3);
  });
});

describe('decisions and counters', () => {
  test('explain puts scores by replica name; counters add up', () => {
    const router = new Router({ replicas: ['a', 'b'], policy: 'cost', explain: true, seed: 3 });
    router.applyEvents('a', [stored(shared)], 0);
    const d = router.route(request('q', hot(0)), 0);
    assert.deepEqual(d.scores, { a: UNIQUE, b: SHARED + UNIQUE });
    const c = router.counters();
    assert.equal(c.policy, 'cost');
    assert.equal(c.decisions, 1);
    assert.equal(c.cachedTokens, SHARED);
    assert.equal(c.uncachedTokens, UNIQUE);
    assert.equal(c.blocksChanged, SHARED / BLOCK);
    const snap = JSON.parse(JSON.stringify(router.snapshot(0)));
    assert.equal(snap.replicas.length, 2);
    assert.equal(snap.policy, 'cost');
  });

  test('unknown replicas and policies are errors with stable codes', () => {
    assert.throws(() => new Router({ replicas: ['a'], policy: 'nope' }), {
      code: 'ERR_UNKNOWN_POLICY',
    });
    assert.throws(() => new Router({ replicas: ['a', 'a'] }), { code: 'ERR_DUPLICATE_REPLICA' });
    const router = new Router({ replicas: ['a'] });
    assert.throws(() => router.markDown('zz'), { code: 'ERR_UNKNOWN_REPLICA' });
  });

  test('replicas can join and leave', () => {
    const router = new Router({ replicas: ['a'] });
    router.addReplica('b');
    router.removeReplica('a');
    assert.deepEqual(router.replicaNames, ['b']);
    assert.equal(router.route(request('q', tokens(1, 64)), 0).replica, 'b');
  });
});
