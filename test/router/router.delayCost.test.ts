/** `delay-cost`: the decision on hand-made snapshots, its learned decode time, and the router. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  DEFAULT_POLICY,
  makePolicy,
  type PickInput,
  type ReplicaView,
  Router,
} from '../../src/router/index.ts';
import { DelayCostPolicy, slotQueueLengths } from '../../src/router/policies/delayCost.ts';
import { Rng } from '../../src/util/rng.ts';
import { BLOCK, replicaView, request, stored, tokens } from '../support/routing.ts';

const SHARED = 6_000;
const UNIQUE = 2_000;
const PROMPT = SHARED + UNIQUE;
/** Round figures: 100 us per token, 64 slots. */
const US = 100;
const SLOTS = 64;

/**
 * Mean queue length of an M/M/c queue at `load` (rho), from the closed form rather than the
 * policy's Erlang B recursion: P(wait) = (a^c / c!) (c / (c - a)) / (sum_{k<c} a^k / k! +
 * (a^c / c!) (c / (c - a))), a = rho c, and Lq = P(wait) rho / (1 - rho). Terms in log space.
 */
function mmcQueueLength(c: number, load: number): number {
  const a = load * c;
  const term = (k: number): number => {
    let log = k * Math.log(a);
    for (let j = 2; j <= k; j++) log -= Math.log(j);
    return Math.exp(log);
  };
  let below = 0;
  for (let k = 0; k < c; k++) below += term(k);
  const top = (term(c) * c) / (c - a);
  return ((top / (below + top)) * load) / (1 - load);
}

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

describe('delay-cost: the spill and who waits behind it', () => {
  test('spilling onto an idle replica: the seed rule, the owner keeps it under the saving', () => {
    const pick = (ownerQueued: number): number =>
      policy().pick(input([view(0, { queued: ownerQueued, prefill: 3, cached: SHARED }), view(1)]))
        .replicaId;
    const cost = (ownerQueued: number): number =>
      makePolicy('cost').pick(input([view(0, { queued: ownerQueued, cached: SHARED }), view(1)]))
        .replicaId;
    for (const queued of [0, 5_999, 6_000, 6_001, 20_000]) {
      assert.equal(pick(queued), cost(queued), `owner queue ${queued}`);
    }
    assert.equal(pick(5_999), 0);
    assert.equal(pick(6_000), 1, 'equal scores go to the shorter queue: the spill');
  });

  test('each request waiting where the spill would land charges its extra prefill once more', () => {
    // The other replica has 1 request waiting (1,000 tokens): its followers are
    // 1 (waiting) + 1/64 (slot load) + Lq(1) (0 to 1e-9): 1,000 + 8,000 + 6,000 x 1.015625.
    const other = view(1, { queued: 1_000, prefill: 1 });
    const pick = (ownerQueued: number): number =>
      policy().pick(input([view(0, { queued: ownerQueued, prefill: 4, cached: SHARED }), other]))
        .replicaId;
    assert.equal(pick(8_000), 0, 'cost spills from 7,000 (7,000 + 2,000 = 1,000 + 8,000)');
    assert.equal(pick(13_050), 0, '15,050 < 15,093.75');
    assert.equal(pick(13_100), 1);
    assert.equal(
      policy(null).pick(input([view(0, { queued: 13_050, cached: SHARED }), other])).replicaId,
      1,
      'no slot limit known: followers = 1, the spill scores 15,000',
    );
  });

  test('scores are milliseconds: tokens x prefill time, the extra prefill per follower', () => {
    const { scores } = policy().pick(
      input([
        view(0, { queued: 4_000, prefill: 2, cached: SHARED }),
        view(1, { queued: 1_000, prefill: 1, decode: 31 }),
      ]),
    );
    // Owner: (4,000 queued + 2,000 uncached) x 0.1 ms = 600 ms, no extra prefill.
    // Spill: (1,000 + 8,000) x 0.1 + 6,000 extra x 0.1 x followers, followers = 32 / 64 slot
    // load + 1 prefilling + Lq(32 of 64 busy), the M/M/c queue length at load 0.5, 4.26e-7.
    const lq = mmcQueueLength(SLOTS, 32 / SLOTS);
    assert.ok(Math.abs(lq - 4.2637e-7) < 1e-10, `${lq}`);
    assert.ok(scores);
    assert.equal(scores.length, 2);
    assert.ok(Math.abs(scores[0]! - 600) < 1e-9, `${scores[0]}`);
    assert.ok(Math.abs(scores[1]! - (1_800 + 600 * lq)) < 1e-9, `${scores[1]}`);
  });

  test('the slot queue lengths are the M/M/c queue lengths, the load capped at 0.95', () => {
    const table = slotQueueLengths(SLOTS, 0.95);
    assert.equal(table.length, SLOTS + 1);
    assert.equal(table[0], 0);
    for (const k of [1, 16, 32, 48, 56, 60]) {
      const expected = mmcQueueLength(SLOTS, k / SLOTS);
      assert.ok(Math.abs(table[k]! - expected) <= 1e-9 * Math.max(1, expected), `Lq(${k})`);
    }
    // 61..64 busy slots are all read at the cap, 0.95: a = 60.8 offered, Lq = 11.17.
    for (const k of [61, 62, 63, 64]) {
      assert.ok(Math.abs(table[k]! - mmcQueueLength(SLOTS, 0.95)) < 1e-9, `Lq(${k})`);
    }
    assert.ok(Math.abs(table[64]! - 11.1722) < 1e-4, `${table[64]}`);
  });

  test('no cache anywhere: no extra prefill, least queued prompt tokens', () => {
    const { replicaId } = policy().pick(
      input([
        view(0, { queued: 3_000, prefill: 9 }),
        view(1, { queued: 2_000, prefill: 1, decode: 63 }),
        view(2, { queued: 2_500 }),
      ]),
    );
    assert.equal(replicaId, 1);
  });

  test('nearly full slots charge a spill steeply (M/M/c queue length), half-full ones barely', () => {
    const owner = view(0, { queued: 13_000, prefill: 4, cached: SHARED });
    const roomy = view(1, { decode: 32 }); // 8,000 + 6,000 x 0.5 = 11,000 < 15,000
    const tight = view(1, { decode: 60 }); // 8,000 + 6,000 x (0.94 + Lq(60) = 5.6) > 15,000
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
    // Closed forms: M/M/1 Lq = rho^2 / (1 - rho); M/M/2 at load 0.5: 1/3.
    assert.ok(Math.abs(slotQueueLengths(1, 0.95)[1]! - 0.95 ** 2 / 0.05) < 1e-9);
    assert.ok(Math.abs(slotQueueLengths(2, 0.95)[1]! - 1 / 3) < 1e-9);
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
  test('is the default policy', () => {
    assert.equal(DEFAULT_POLICY, 'delay-cost');
    assert.equal(new Router({ replicas: ['a'] }).policyName, 'delay-cost');
  });

  test('with requests waiting elsewhere the owner keeps a hot prefix twice as long as cost', () => {
    const shared = tokens(1, SHARED);
    const other = tokens(2, SHARED);
    const hot = (i: number): number[] => shared.concat(tokens(100 + i, UNIQUE));
    /** Hot requests the owner takes before the first spill. */
    const ownerRun = (policy: string): number => {
      const router = new Router({
        replicas: ['a', 'b'],
        policy,
        policyOptions: { maxSeqs: SLOTS },
        seed: 9,
      });
      router.applyEvents('a', [stored(shared)], 0);
      router.applyEvents('b', [stored(other)], 0);
      // One of b's own customers waits there: 2,000 queued tokens, one request.
      assert.equal(router.route(request('o', other.concat(tokens(50, UNIQUE))), 0).replica, 'b');
      let i = 0;
      while (router.route(request(`h${i}`, hot(i)), 1).replica === 'a') i++;
      return i;
    };
    // cost: a while 2,000 + queue(a) < 2,000 + 8,000: queues 0..6,000.
    assert.equal(ownerRun('cost'), 4);
    // delay-cost: b scores 2,000 + 8,000 + 6,000 x (1 + 1/64) = 16,094: queues 0..14,000.
    assert.equal(ownerRun('delay-cost'), 8);
  });
});
