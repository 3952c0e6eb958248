/** Policy tuning options off their defaults change the decision where the source says they do. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { makePolicy, type PickInput, type ReplicaView } from '../../src/router/index.ts';
import {
  DEFAULT_HASH_PREFIX_BLOCKS,
  hashString32,
  prefixHash,
} from '../../src/router/policies/hashRing.ts';
import { Rng } from '../../src/util/rng.ts';
import { BLOCK, replicaView } from '../support/routing.ts';

const input = (candidates: ReplicaView[]): PickInput => ({
  request: { id: 'q', blockKeys: [1, 2, 3, 4], promptTokens: 4 * BLOCK, blockSize: BLOCK },
  nowMs: 0,
  candidates,
  fleet: candidates.map((c) => c.name),
  fleetVersion: 1,
  rng: new Rng(1),
});

test('aibrix: imbalanceRunning (default 16) decides when least-running overrides the match', () => {
  // r0 holds the whole prefix with 10 running, r1 nothing with 0: max - min = 10.
  const views = [
    replicaView(0, { inFlight: 10, cachedBlocks: 4, cachedTokens: 4 * BLOCK }),
    replicaView(1, { inFlight: 0 }),
  ];
  assert.equal(makePolicy('aibrix').pick(input(views)).replicaId, 0, '10 <= 16: the match wins');
  assert.equal(
    makePolicy('aibrix', { imbalanceRunning: 9 }).pick(input(views)).replicaId,
    1,
    '10 > 9: least running',
  );
  // stddevFactor: mean 5, sigma 5; the bound mean + f x sigma admits r0 (10) only for f >= 1.
  assert.equal(makePolicy('aibrix', { stddevFactor: 0.5 }).pick(input(views)).replicaId, 1);
  assert.equal(makePolicy('aibrix', { stddevFactor: 1 }).pick(input(views)).replicaId, 0);
});

test('chwbl: loadFactor bounds the owner at (total + 1) / n x factor', () => {
  const router = (loadFactor?: number) =>
    makePolicy('chwbl', loadFactor === undefined ? {} : { loadFactor });
  // Whichever replica the ring names first, give it 3 in flight and the other 0:
  // bound = (3 + 1) / 2 x f: 2.5 at 1.25 (default) sends the request on, 4 at 2 keeps it.
  const probe = router().pick(input([replicaView(0), replicaView(1)])).replicaId;
  const views = [0, 1].map((id) => replicaView(id, { inFlight: id === probe ? 3 : 0 }));
  assert.notEqual(router().pick(input(views)).replicaId, probe, '3 > 2.5: walks on');
  assert.equal(router(2).pick(input(views)).replicaId, probe, '3 <= 4: stays');
});

/** A request for adapter `lora` over the same four blocks. */
const loraInput = (candidates: ReplicaView[], lora: string): PickInput => ({
  ...input(candidates),
  request: { ...input(candidates).request, lora },
});

test('dynamo: overlapWeight (default 1) scales the prefill term against the decode term', () => {
  // r0 holds the 4 blocks with 3 decode blocks active: w x 0 + 3; r1 nothing: w x 4 + 0.
  const views = [replicaView(0, { cachedBlocks: 4, activeDecodeBlocks: 3 }), replicaView(1)];
  assert.equal(makePolicy('dynamo').pick(input(views)).replicaId, 0, '3 < 4');
  const half = makePolicy('dynamo', { overlapWeight: 0.5 }).pick(input(views));
  assert.equal(half.replicaId, 1, '3 > 2');
  assert.deepEqual(half.scores, [3, 2]);
});

describe('llmd: each scorer weight off its default tips the decision', () => {
  // prefix term: matched / prompt blocks; queue term: (maxQ - q) / (maxQ - minQ); kv: 1 - usage.
  test('prefixWeight (3) and queueWeight (2)', () => {
    // r0: the whole prefix, 2 waiting; r1: nothing, 0 waiting. Default: 3 + 0 + 2 = 5 vs 0 + 2 + 2 = 4.
    const views = [replicaView(0, { cachedBlocks: 4, waiting: 2 }), replicaView(1)];
    assert.deepEqual(makePolicy('llmd').pick(input(views)).scores, [5, 4]);
    assert.equal(makePolicy('llmd').pick(input(views)).replicaId, 0);
    const lowPrefix = makePolicy('llmd', { prefixWeight: 1 }).pick(input(views));
    assert.deepEqual(lowPrefix.scores, [3, 4]);
    assert.equal(lowPrefix.replicaId, 1);
    const highQueue = makePolicy('llmd', { queueWeight: 4 }).pick(input(views));
    assert.deepEqual(highQueue.scores, [5, 6]);
    assert.equal(highQueue.replicaId, 1);
  });

  test('kvWeight (2)', () => {
    // r0: the whole prefix at 90 % KV; r1: nothing, empty. Default 3 + 2 + 0.2 vs 0 + 2 + 2.
    const views = [replicaView(0, { cachedBlocks: 4, kvUsage: 0.9 }), replicaView(1)];
    assert.equal(makePolicy('llmd').pick(input(views)).replicaId, 0, '5.2 > 4');
    assert.equal(makePolicy('llmd', { kvWeight: 4 }).pick(input(views)).replicaId, 1, '5.4 < 6');
  });

  test('loraWeight (1)', () => {
    // r0: the whole prefix, no room for the adapter (affinity 0); r1: nothing, adapter running (1).
    const full = { running: false, waiting: false, resident: false, active: 1, maxLoras: 1 };
    const running = { running: true, waiting: false, resident: true, active: 1, maxLoras: 1 };
    const views = [
      replicaView(0, { cachedBlocks: 4, lora: full }),
      replicaView(1, { lora: running }),
    ];
    assert.equal(makePolicy('llmd').pick(loraInput(views, 'a')).replicaId, 0, '7 > 5');
    const heavy = makePolicy('llmd', { loraWeight: 4 }).pick(loraInput(views, 'a'));
    assert.deepEqual(heavy.scores, [7, 8]);
    assert.equal(heavy.replicaId, 1);
  });
});

describe('sglang: thresholds and tree size', () => {
  /** An sglang policy that has routed the four blocks to r0 (its approximate tree). */
  const routedToR0 = (options: Parameters<typeof makePolicy>[1] = {}, keys = [1, 2, 3, 4]) => {
    const policy = makePolicy('sglang', options);
    const request = { ...input([]).request, blockKeys: keys };
    policy.onRouted?.({ request, replicaId: 0, cachedTokens: 0, nowMs: 0 });
    return policy;
  };

  test('balanceAbsThreshold (64): a gap above it sends the request to the least loaded', () => {
    const views = [replicaView(0, { inFlight: 10 }), replicaView(1)];
    assert.equal(routedToR0().pick(input(views)).replicaId, 0, '10 <= 64: the match wins');
    const tight = routedToR0({ balanceAbsThreshold: 5 }).pick(input(views));
    assert.equal(tight.replicaId, 1, '10 > 5 and 10 > 1.5 x 0: least loaded');
  });

  test('balanceRelThreshold (1.5): imbalanced only when max > rel x min', () => {
    // 100 vs 50 in flight, gap 50 above an absolute threshold of 5.
    const views = [replicaView(0, { inFlight: 100 }), replicaView(1, { inFlight: 50 })];
    const abs = { balanceAbsThreshold: 5 };
    assert.equal(routedToR0(abs).pick(input(views)).replicaId, 1, '100 > 75: least loaded');
    const rel = routedToR0({ ...abs, balanceRelThreshold: 3 }).pick(input(views));
    assert.equal(rel.replicaId, 0, '100 <= 150: balanced, the match wins');
  });

  test('cacheThreshold (0.3): the match rate must exceed it', () => {
    // r0 holds 1 of the 4 blocks (rate 0.25) with 1 in flight; r1 is idle.
    const views = [replicaView(0, { inFlight: 1 }), replicaView(1)];
    assert.equal(routedToR0({}, [1]).pick(input(views)).replicaId, 1, '0.25 <= 0.3');
    const low = routedToR0({ cacheThreshold: 0.2 }, [1]).pick(input(views));
    assert.equal(low.replicaId, 0, '0.25 > 0.2');
    assert.deepEqual(low.scores, [0.25, 0]);
  });

  test('treeBlocks (65,536): a small tree forgets the tail of what it routed', () => {
    // The four blocks routed to r0; with room for 2 the tree keeps at most half the prompt.
    const views = [replicaView(0, { inFlight: 1 }), replicaView(1)];
    const strict = { cacheThreshold: 0.6 };
    assert.equal(routedToR0(strict).pick(input(views)).replicaId, 0, 'all 4 remembered: 1 > 0.6');
    const small = routedToR0({ ...strict, treeBlocks: 2 }).pick(input(views));
    assert.equal(small.replicaId, 1, 'at most 2 of 4 remembered: <= 0.5');
  });
});

describe('consistent-hash and chwbl: the ring options', () => {
  const fleet = [0, 1, 2, 3, 4, 5, 6, 7].map((id) => replicaView(id));
  /** Request `i`: 40 blocks, the first two shared by all, the rest its own. */
  const keyed = (i: number): PickInput => ({
    ...input(fleet),
    request: {
      id: `q${i}`,
      blockKeys: [11, 12, ...Array.from({ length: 38 }, (_, b) => 1_000 * (i + 1) + b)],
      promptTokens: 40 * BLOCK,
      blockSize: BLOCK,
    },
  });
  const owners = (name: 'consistent-hash' | 'chwbl', options = {}): Set<number> => {
    const policy = makePolicy(name, options);
    return new Set(Array.from({ length: 32 }, (_, i) => policy.pick(keyed(i)).replicaId));
  };

  test('prefixBlocks (32; chwbl 2): the key is the block at that depth, so 2 shared blocks pin a replica', () => {
    for (const name of ['consistent-hash', 'chwbl'] as const) {
      assert.equal(owners(name, { prefixBlocks: 2 }).size, 1, `${name}: one owner`);
      assert.ok(
        owners(name, { prefixBlocks: 32 }).size > 1,
        `${name}: the 32nd block differs, so do the owners`,
      );
    }
    // chwbl's default, KubeAI's 100 characters of prefix: the 2 shared blocks.
    assert.equal(owners('chwbl').size, 1);
    assert.ok(owners('consistent-hash').size > 1);
  });

  test('virtualNodes (256): with one node each, a key goes to the first node clockwise', () => {
    // The ring by hand: one point per replica at hash("r<id>#0"); a key's owner is the first
    // point at or after the key's hash, wrapping.
    const points = fleet
      .map((v) => ({ id: v.id, at: hashString32(`${v.name}#0`) }))
      .sort((a, b) => a.at - b.at);
    const byHand = (i: number): number => {
      const h = prefixHash(keyed(i).request, DEFAULT_HASH_PREFIX_BLOCKS);
      return (points.find((p) => p.at >= h) ?? points[0]!).id;
    };
    const one = makePolicy('consistent-hash', { virtualNodes: 1 });
    const many = makePolicy('consistent-hash');
    let differs = 0;
    for (let i = 0; i < 32; i++) {
      assert.equal(one.pick(keyed(i)).replicaId, byHand(i), `request ${i}`);
      if (many.pick(keyed(i)).replicaId !== byHand(i)) differs++;
    }
    assert.ok(differs > 0, '256 nodes per replica place some keys elsewhere');
  });
});

describe('delay-cost: time scale and adapters', () => {
  test('prefillUsPerToken (71.3): token work in ms against the wait for a slot', () => {
    // 2 slots, a learned decode time of 1,000 ms. r0 is full: slot wait (2 + 1 - 2) x 1000 / 2
    // = 500 ms. r1 has 6,000 prompt tokens queued: 6,000 x p. 427.8 ms at 71.3 us, 600 at 100.
    const policy = (us?: number) => {
      const p = makePolicy('delay-cost', {
        maxSeqs: 2,
        ...(us !== undefined && { prefillUsPerToken: us }),
      });
      p.onFirstToken?.('done', 0, 0);
      p.onFinished?.('done', 0, 1_000);
      return p;
    };
    const views = [replicaView(0, { inFlight: 2 }), replicaView(1, { queuedPromptTokens: 6_000 })];
    assert.equal(policy().pick(input(views)).replicaId, 1, '427.8 ms < 500 ms');
    assert.equal(policy(100).pick(input(views)).replicaId, 0, '600 ms > 500 ms');
  });

  test('loraLoadTokens (1,177) and loraBlind', () => {
    // r0: idle, adapter not resident; r1: resident, 600 prompt tokens queued. The 64-token
    // prompt costs 64 + load on r0, 600 + 64 on r1.
    const cold = { running: false, waiting: false, resident: false, active: 0, maxLoras: 4 };
    const warm = { running: true, waiting: false, resident: true, active: 1, maxLoras: 4 };
    const views = [
      replicaView(0, { lora: cold }),
      replicaView(1, { lora: warm, queuedPromptTokens: 600 }),
    ];
    const pick = (options = {}) => makePolicy('delay-cost', options).pick(loraInput(views, 'a'));
    assert.equal(pick().replicaId, 1, '64 + 1,177 > 664');
    assert.equal(pick({ loraLoadTokens: 500 }).replicaId, 0, '64 + 500 < 664');
    assert.equal(pick({ loraBlind: true }).replicaId, 0, 'no load term: 64 < 664');
    assert.equal(makePolicy('delay-cost').loraAware, true);
    assert.equal(makePolicy('delay-cost', { loraBlind: true }).loraAware, false, 'no slot guard');
  });
});

for (const policy of ['cost', 'delay-cost']) {
  test(`${policy}: cpuReloadUsPerToken (default 5.2) prices a CPU-tier hit against a recompute`, () => {
    // r0 holds the 4-block prompt in its CPU tier only; r1 holds nothing. Both idle.
    const views = [replicaView(0, { cachedBlocks: 4, cpuCachedTokens: 4 * BLOCK }), replicaView(1)];
    // Default: the reload is 5.2 / 71.3 of a recompute per token, so the CPU owner wins.
    assert.equal(makePolicy(policy).pick(input(views)).replicaId, 0);
    // 80 us per token reloads slower than the 71.3 us a prefill token takes: recompute on r1.
    assert.equal(makePolicy(policy, { cpuReloadUsPerToken: 80 }).pick(input(views)).replicaId, 1);
    // Just under the prefill cost the reload still wins.
    assert.equal(makePolicy(policy, { cpuReloadUsPerToken: 70 }).pick(input(views)).replicaId, 0);
  });
}
