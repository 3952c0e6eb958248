/** `delay-cost`: the decision on hand-made snapshots, its learned decode time, and the router. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { makePolicy, type PickInput, type ReplicaView, Router } from '../src/router/index.ts';
import { DelayCostPolicy, slotQueueLengths } from '../src/router/policies/delayCost.ts';
import { Rng } from '../src/util/rng.ts';
import { BLOCK, replicaView, request, stored, tokens } from './support/routing.ts';

const SHARED = 6_000;
const UNIQUE = 2_000;
const PROMPT = SHARED + UNIQUE;
/** Round figures: 100 us per token, 64 slots. */
const US = 100;
const SLOTS = 64;

/** The policy knowing the engines' slot limit, or not (`null`). */
const policy = (maxSeqs: number | null = SLOTS): DelayCostPolicy =>
  new DelayCostPolicy({ prefillUsPerToken: US, ...(maxSeqs !== null && { maxSeqs }) });

const input = (candidates: ReplicaView[], nowMs = 0): PickInput => ({
  request: { id: 'q', blockKeys: [], promptTokens: PROMPT, blockSize: BLOCK },
  nowMs,
  candidates,
  fleet: candidates.map((c) => c.name),
  fleetVersion: 1,
  rng: new Rng(1),
});

/** Replica `id` with `queued` prompt tokens in `prefill` requests and `decode` decoding. */
const view = (
  id: number,
  o: { queued?: number; prefill?: number; decode?: number; cached?: number } = {},
): ReplicaView => {
  const prefill = o.prefill ?? 0;
  const decode = o.decode ?? 0;
  return replicaView(id, {
    queuedPromptTokens: o.queued ?? 0,
    prefillRequests: prefill,
    decodeRequests: decode,
    inFlight: prefill + decode,
    cachedBlocks: (o.cached ?? 0) / BLOCK,
  });
};

describe('delay-cost on an idle fleet', () => {
  test('the owner keeps the prefix while its extra queue is under twice the saving', () => {
    const pick = (ownerQueued: number): number =>
      policy().pick(input([view(0, { queued: ownerQueued, prefill: 1, cached: SHARED }), view(1)]))
        .replicaId;
    // Owner: queued + 2,000; idle cold replica: 8,000 + 6,000 x (1 + 0 waiting there).
    assert.equal(pick(0), 0);
    assert.equal(pick(6_000), 0, 'where cost would already spill (6,000 = the saving)');
    assert.equal(pick(11_999), 0);
    assert.equal(pick(12_000), 1, 'equal scores go to the shorter queue: the spill');
    assert.equal(pick(12_001), 1);
    assert.equal(
      makePolicy('cost').pick(input([view(0, { queued: 6_000, cached: SHARED }), view(1)]))
        .replicaId,
      1,
    );
  });

  test('scores are milliseconds: tokens x prefill time, the extra prefill charged per follower', () => {
    const { scores } = policy().pick(
      input([
        view(0, { queued: 4_000, prefill: 2, cached: SHARED }),
        view(1, { queued: 1_000, prefill: 1 }),
      ]),
    );
    assert.deepEqual(scores, [
      (4_000 + UNIQUE) * US * 1e-3,
      (1_000 + PROMPT + SHARED * (1 + 1)) * US * 1e-3,
    ]);
  });

  test('no cache anywhere: no extra prefill, least queued prompt tokens', () => {
    const { replicaId } = policy().pick(
      input([
        view(0, { queued: 3_000, prefill: 9 }),
        view(1, { queued: 2_000, prefill: 1 }),
        view(2, { queued: 2_500 }),
      ]),
    );
    assert.equal(replicaId, 1);
  });
});

describe('delay-cost near saturation', () => {
  test('a spill costs more where requests already wait: the same owner queue stays', () => {
    const owner = view(0, { queued: 13_000, prefill: 4, cached: SHARED });
    assert.equal(policy().pick(input([owner, view(1)])).replicaId, 1, 'idle replica: spill');
    assert.equal(
      policy().pick(input([owner, view(1, { queued: 1_000, prefill: 1 })])).replicaId,
      0,
      'one request waiting there doubles the charge: 1,000 + 8,000 + 12,000 > 15,000',
    );
  });

  test('nearly full slots charge a spill more (M/M/c queue length), idle slots do not', () => {
    const owner = view(0, { queued: 13_000, prefill: 4, cached: SHARED });
    const roomy = view(1, { decode: 32 });
    const tight = view(1, { decode: 60 });
    assert.equal(policy().pick(input([owner, roomy])).replicaId, 1);
    assert.equal(policy().pick(input([owner, tight])).replicaId, 0);
    assert.equal(policy(null).pick(input([owner, tight])).replicaId, 1, 'no slot limit known');
  });

  test('slot queue lengths: 0 when idle, small at half load, steep near full, capped', () => {
    const lq = slotQueueLengths(SLOTS, 0.95);
    assert.equal(lq.length, SLOTS + 1);
    assert.equal(lq[0], 0);
    assert.ok(lq[32]! < 1e-3, `half full ${lq[32]}`);
    assert.ok(lq[48]! < 0.2, `75 % ${lq[48]}`);
    assert.ok(lq[58]! > 1, `90 % ${lq[58]}`);
    for (let k = 1; k <= SLOTS; k++) assert.ok(lq[k]! >= lq[k - 1]!, `monotone at ${k}`);
    assert.equal(lq[SLOTS], lq[Math.ceil(0.95 * SLOTS)], 'load capped at 0.95');
    // M/M/1 at load 0.5: Lq = rho^2 / (1 - rho) = 0.5.
    assert.ok(Math.abs(slotQueueLengths(1, 0.95)[1]! - 0.95 ** 2 / 0.05) < 1e-9);
    assert.ok(Math.abs(slotQueueLengths(2, 0.95)[1]! - 1 / 3) < 1e-9, 'M/M/2 at 0.5: 1/3');
  });
});

describe('delay-cost: waiting for a sequence slot', () => {
  /** A policy that has seen `n` requests decode for `decodeMs` each (on replica 0). */
  const learned = (decodeMs: number, n = 1, maxSeqs: number | null = SLOTS): DelayCostPolicy => {
    const p = policy(maxSeqs);
    for (let i = 0; i < n; i++) {
      p.onFirstToken(`d${i}`, 0, 0);
      p.onFinished(`d${i}`, 0, decodeMs);
    }
    return p;
  };

  test('an owner out of slots sheds a request to a replica with free ones', () => {
    // 12,800 ms decodes over 64 slots: a slot frees every 200 ms. The owner holds 64 + 6.
    const owner = view(0, { queued: 2_000, prefill: 6, decode: 64, cached: SHARED });
    const free = view(1, { decode: 20 });
    const p = learned(12_800);
    const { replicaId, scores } = p.pick(input([owner, free]));
    assert.equal(replicaId, 1);
    assert.equal(scores![0], (2_000 + UNIQUE) * US * 1e-3 + 7 * 200);
    assert.equal(learned(12_800, 1, null).pick(input([owner, free])).replicaId, 0);
    assert.equal(learned(0).pick(input([owner, free])).replicaId, 0, 'decodes take no time');
  });

  test('decode time: a running mean of first token to finish; before any, the oldest decode', () => {
    const p = policy();
    assert.equal(p.decodeMs, undefined);
    const owner = view(0, { queued: 2_000, prefill: 6, decode: 64, cached: SHARED });
    const free = view(1, { decode: 20 });
    p.onFirstToken('a', 0, 1_000);
    p.onFirstToken('b', 1, 5_000);
    // Nothing finished: the oldest running decode has lasted 12,800 ms at 13,800.
    assert.equal(p.pick(input([owner, free], 13_800)).replicaId, 1);
    assert.equal(p.pick(input([owner, free], 2_000)).replicaId, 0, 'only 1,000 ms so far');
    p.onFinished('a', 0, 11_000);
    assert.equal(p.decodeMs, 10_000);
    p.onFinished('b', 1, 5_000 + 10_000 + 3_200);
    assert.equal(p.decodeMs, 10_000 + 3_200 / 32);
    p.onFinished('never-started', 1, 20_000);
    assert.equal(p.decodeMs, 10_100, 'a request that ended before its first token adds nothing');
  });
});

describe('delay-cost behind the router', () => {
  test('the owner keeps a hot prefix through twice the queue cost allows, then spills', () => {
    const shared = tokens(1, SHARED);
    const hot = (i: number): number[] => shared.concat(tokens(100 + i, UNIQUE));
    const router = new Router({
      replicas: ['a', 'b'],
      policy: 'delay-cost',
      policyOptions: { maxSeqs: SLOTS },
      seed: 9,
    });
    router.applyEvents('a', [stored(shared)], 0);
    const picks = [0, 1, 2, 3, 4, 5, 6].map((i) => router.route(request(`h${i}`, hot(i)), 1));
    assert.deepEqual(
      picks.map((d) => d.replica),
      ['a', 'a', 'a', 'a', 'a', 'a', 'b'],
      'extra queue 0..10,000 keeps the owner (cost spills at 6,000); 12,000 ties and spills',
    );
    assert.equal(picks[6]!.spilled, true);
    // b is warm now (overlay) and idle: the next one goes there warm.
    const next = router.route(request('h7', hot(7)), 2);
    assert.equal(next.replica, 'b');
    assert.equal(next.cachedTokens, SHARED);
  });
});
