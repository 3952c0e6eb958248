/** Each peer baseline pinned to its documented rule, on hand-built snapshots. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  makePolicy,
  type PickInput,
  type ReplicaView,
  type RouteRequest,
  Router,
} from '../../src/router/index.ts';
import { HashRing, prefixHash } from '../../src/router/policies/hashRing.ts';
import { Rng } from '../../src/util/rng.ts';
import { replicaView as view, request, tokens as tokenStream } from '../support/routing.ts';

const tokens = (seed: number, count: number): number[] => tokenStream(seed, count, 5, 80000);

function input(candidates: ReplicaView[], req: RouteRequest, seed = 1): PickInput {
  return {
    request: req,
    nowMs: 0,
    candidates,
    fleet: candidates.map((c) => c.name),
    fleetVersion: 1,
    rng: new Rng(seed),
  };
}

/** A 100-block prompt (1,600 tokens). */
const req100 = request('q', tokens(1, 1_600));

describe('random and round-robin', () => {
  test('random covers every replica; round-robin cycles in id order, skipping filtered ones', () => {
    const router = new Router({ replicas: ['a', 'b', 'c'], policy: 'random', seed: 8 });
    const seen = new Set<string>();
    for (let i = 0; i < 60; i++) seen.add(router.route(request(`x${i}`, tokens(1, 64)), 0).replica);
    assert.equal(seen.size, 3);
    const rr = new Router({ replicas: ['a', 'b', 'c'], policy: 'round-robin' });
    const order = [0, 1, 2, 3, 4].map((i) => rr.route(request(`y${i}`, tokens(1, 64)), 0).replica);
    assert.deepEqual(order, ['a', 'b', 'c', 'a', 'b']);
    rr.markDown('c');
    assert.deepEqual(
      [5, 6, 7].map((i) => rr.route(request(`y${i}`, tokens(1, 64)), 0).replica),
      ['a', 'b', 'a'],
    );
  });
});

describe('least-queued', () => {
  test('fewest queued prompt tokens, ignoring the cache', () => {
    const p = makePolicy('least-queued');
    const pick = p.pick(
      input(
        [
          view(0, { queuedPromptTokens: 500, cachedBlocks: 100 }),
          view(1, { queuedPromptTokens: 499 }),
        ],
        req100,
      ),
    );
    assert.equal(pick.replicaId, 1);
  });
});

describe('consistent-hash', () => {
  test('same block-aligned prefix, same replica, whatever the load and suffix', () => {
    const router = new Router({ replicas: ['a', 'b', 'c', 'd'], policy: 'consistent-hash' });
    const shared = tokens(2, 1_024);
    const first = router.route(request('0', shared.concat(tokens(3, 500))), 0);
    for (let i = 1; i < 20; i++) {
      assert.equal(
        router.route(request(`${i}`, shared.concat(tokens(3 + i, 500))), 0).replica,
        first.replica,
      );
    }
  });

  test('a filtered replica is skipped without moving other keys', () => {
    const ring = new HashRing(['a', 'b', 'c', 'd'], 1, 256);
    const owners = Array.from({ length: 40 }, (_, i) =>
      ring.walk(prefixHash(request(`${i}`, tokens(i, 512)), 32), () => true),
    );
    const without0 = Array.from({ length: 40 }, (_, i) =>
      ring.walk(prefixHash(request(`${i}`, tokens(i, 512)), 32), (id) => id !== 0),
    );
    owners.forEach((o, i) => {
      if (o !== 0) assert.equal(without0[i], o);
      else assert.notEqual(without0[i], 0);
    });
  });
});

describe('chwbl', () => {
  test("walks past an endpoint whose in-flight + 1 is over (total + 1) / n x 1.25 (KubeAI's chwblLoadOK)", () => {
    const p = makePolicy('chwbl');
    const loads = [0, 0, 0, 0];
    const base = input(
      loads.map((l, i) => view(i, { inFlight: l })),
      req100,
    );
    const home = p.pick(base).replicaId;
    // total = 10, n = 4: bound = 11 / 4 x 1.25 = 3.4375. Home at 3 (+1 = 4) is over; at 2 it is not.
    // Home 3, its neighbour 3, the others 2: total 10.
    const over = [0, 1, 2, 3].map((i) => (i === home || i === (home + 1) % 4 ? 3 : 2));
    const moved = p.pick(
      input(
        over.map((l, i) => view(i, { inFlight: l })),
        req100,
      ),
    ).replicaId;
    assert.notEqual(moved, home);
    // Home 2, its neighbour 4: total still 10, and home's 2 + 1 <= 3.4375.
    const within = over.map((l, i) => (i === home ? 2 : i === (home + 1) % 4 ? 4 : l));
    const stays = p.pick(
      input(
        within.map((l, i) => view(i, { inFlight: l })),
        req100,
      ),
    ).replicaId;
    assert.equal(stays, home);
  });
});

describe('sglang', () => {
  test('imbalanced (max - min > 64 and max > 1.5 x min): least loaded despite a cache hit', () => {
    const p = makePolicy('sglang');
    p.onRouted?.({ request: req100, replicaId: 0, cachedTokens: 0, nowMs: 0 });
    const hit = p.pick(input([view(0, { inFlight: 100 }), view(1, { inFlight: 60 })], req100));
    assert.equal(hit.replicaId, 0, 'max - min = 40: balanced, the 100 % match wins');
    const imbalanced = p.pick(
      input([view(0, { inFlight: 100 }), view(1, { inFlight: 35 })], req100),
    );
    assert.equal(imbalanced.replicaId, 1, 'max - min = 65 and 100 > 52.5');
    const relOnly = p.pick(input([view(0, { inFlight: 200 }), view(1, { inFlight: 135 })], req100));
    assert.equal(relOnly.replicaId, 0, '200 < 1.5 x 135: not imbalanced');
  });

  test('match rate must exceed 0.3, from its own record of what it sent', () => {
    const p = makePolicy('sglang');
    const toks = tokens(9, 1_600);
    const prefix30 = request('p', toks.slice(0, 480)); // 30 of 100 blocks
    p.onRouted?.({ request: prefix30, replicaId: 0, cachedTokens: 0, nowMs: 0 });
    const q = request('q', toks);
    const cands = [view(0, { inFlight: 5 }), view(1, { inFlight: 1 })];
    assert.equal(p.pick(input(cands, q)).replicaId, 1, '0.30 is not > 0.3: least loaded');
    p.onRouted?.({
      request: request('p2', toks.slice(0, 496)),
      replicaId: 0,
      cachedTokens: 0,
      nowMs: 0,
    });
    assert.equal(p.pick(input(cands, q)).replicaId, 0, '0.31 > 0.3: the best match');
    p.onReplicaRemoved?.(0);
    assert.equal(p.pick(input(cands, q)).replicaId, 1);
  });
});

describe('dynamo', () => {
  test('prefill blocks + request blocks - overlap + decode blocks, ties to the smaller tree', () => {
    const p = makePolicy('dynamo', {});
    // r0: 10 + 100 - 80 + 40 = 70; r1: 0 + 100 - 0 + 0 = 100.
    const a = p.pick(
      input(
        [view(0, { activePrefillBlocks: 10, cachedBlocks: 80, activeDecodeBlocks: 40 }), view(1)],
        req100,
      ),
    );
    assert.equal(a.replicaId, 0);
    assert.deepEqual(a.scores, [70, 100]);
    // r0: 30 + 100 - 80 + 50 = 100 ties r1 at 100: the smaller tree wins.
    const tie = [
      view(0, {
        activePrefillBlocks: 30,
        cachedBlocks: 80,
        activeDecodeBlocks: 50,
        indexedBlocks: 500,
      }),
      view(1, { indexedBlocks: 20 }),
    ];
    assert.equal(p.pick(input(tie, req100)).replicaId, 1);
  });

  test('prefill load moves to decode when the first token arrives', () => {
    const router = new Router({ replicas: ['a'], policy: 'dynamo' });
    router.route(request('x', tokens(3, 800)), 0);
    assert.equal(router.snapshot().replicas[0]!.activePrefillBlocks, 50);
    router.onFirstToken('x', 1);
    const r = router.snapshot().replicas[0]!;
    assert.equal(r.activePrefillBlocks, 0);
    assert.equal(r.activeDecodeBlocks, 50);
  });
});

describe('llmd', () => {
  test('3 x prefix + 2 x queue + 2 x (1 - kv), maximum wins', () => {
    const p = makePolicy('llmd');
    const cands = [
      view(0, { cachedBlocks: 50, waiting: 10, kvUsage: 0.5 }), // 1.5 + 0 + 1.0 = 2.5
      view(1, { cachedBlocks: 0, waiting: 0, kvUsage: 0.2 }), //   0 + 2 + 1.6 = 3.6
      view(2, { cachedBlocks: 100, waiting: 5, kvUsage: 0.6 }), // 3 + 1 + 0.8 = 4.8
    ];
    const pick = p.pick(input(cands, req100));
    assert.equal(pick.replicaId, 2);
    assert.deepEqual(
      pick.scores?.map((s) => Number(s.toFixed(6))),
      [2.5, 3.6, 4.8],
    );
    const equalQueues = p.pick(
      input([view(0, { waiting: 3, kvUsage: 0.1 }), view(1, { waiting: 3 })], req100),
    );
    assert.deepEqual(
      equalQueues.scores?.map((s) => Number(s.toFixed(6))),
      [3.8, 4],
    );
  });
});

describe('aibrix', () => {
  test('max - min running > 16: least running', () => {
    const p = makePolicy('aibrix');
    const cands = [view(0, { inFlight: 20, cachedBlocks: 100 }), view(1, { inFlight: 3 })];
    assert.equal(p.pick(input(cands, req100)).replicaId, 1);
    cands[1] = view(1, { inFlight: 4 });
    assert.equal(p.pick(input(cands, req100)).replicaId, 0, 'difference 16 is not > 16');
  });

  test('best match first, unless its running exceeds mean + 2 sigma', () => {
    const p = makePolicy('aibrix');
    // Running 10 and eight at 0: mean 1.11, sigma 3.14, bound 7.4: the 100 % match is skipped.
    const cands = [
      view(0, { inFlight: 10, cachedBlocks: 100 }),
      view(1, { inFlight: 0, cachedBlocks: 50 }),
    ];
    for (let i = 2; i < 9; i++) cands.push(view(i));
    assert.equal(p.pick(input(cands, req100)).replicaId, 1);
    // Equal match %: fewer running first.
    const tied = [
      view(0, { inFlight: 2, cachedBlocks: 60 }),
      view(1, { inFlight: 1, cachedBlocks: 60 }),
      view(2),
    ];
    assert.equal(p.pick(input(tied, req100)).replicaId, 1);
    // No match anywhere: least running.
    const none = [view(0, { inFlight: 2 }), view(1, { inFlight: 1 })];
    assert.equal(p.pick(input(none, req100)).replicaId, 1);
  });
});
