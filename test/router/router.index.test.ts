/** Prefix indexes: one suite for both modes, then each mode's own forgetting, the overlay, the
 * table underneath and the foreign-hash translation. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { computeBlockKeys, toWireHash } from '../../src/kv/blockKey.ts';
import type { KvEvent } from '../../src/kv/events.ts';
import {
  BlockIndex,
  ForeignKeyMap,
  type ForeignKvEvent,
  type IndexMode,
  makePrefixIndex,
  matchPrefix,
  type RouteDecision,
  Router,
  replicaMask,
} from '../../src/router/index.ts';
import { SlotTable } from '../../src/router/index/slotTable.ts';
import {
  BLOCK,
  request,
  stored as storedTokens,
  tokens as tokenStream,
} from '../support/routing.ts';

const tokens = (seed: number, count: number): number[] => tokenStream(seed, count, 11, 60000);
const stored = (keys: number[], toks: number[]): KvEvent => storedTokens(toks, keys);

/** How each mode learns where a prompt's blocks are after a route. */
const feeds: Record<IndexMode, (router: Router, d: RouteDecision, toks: number[]) => void> = {
  events: (router, d, toks) =>
    router.applyEvents(d.replica, [stored(computeBlockKeys(toks, BLOCK), toks)], 0),
  approx: () => {},
};

for (const mode of ['events', 'approx'] as const) {
  describe(`prefix index conformance: ${mode}`, () => {
    const make = (replicas = 4): Router =>
      new Router({
        replicas: Array.from({ length: replicas }, (_, i) => `r${i}`),
        indexMode: mode,
        overlayTtlMs: 0,
        seed: 5,
      });

    test('a repeated prefix routes to its owner', () => {
      const router = make();
      const shared = tokens(1, 6_000);
      const first = shared.concat(tokens(2, 2_000));
      const d0 = router.route(request('a', first), 0);
      feeds[mode](router, d0, first);
      router.onFirstToken('a', 1);
      router.onFinished('a', 2);
      for (let i = 0; i < 5; i++) {
        const d = router.route(request(`b${i}`, shared.concat(tokens(10 + i, 2_000))), 3);
        assert.equal(d.replica, d0.replica);
        assert.equal(d.cachedTokens, 6_000);
        assert.equal(d.uncachedTokens, 2_000);
        router.onFinished(`b${i}`, 4);
      }
    });

    test('clearing a replica forgets its blocks', () => {
      const index = makePrefixIndex(mode, 3);
      const toks = tokens(3, 320);
      const keys = computeBlockKeys(toks, BLOCK);
      if (mode === 'events') index.applyEvents(1, [stored(keys, toks)]);
      else index.recordRoute(1, keys);
      assert.equal(index.blockCount(1), 20);
      index.clearReplica(1);
      assert.equal(index.blockCount(1), 0);
      const out = new Int32Array(3);
      matchPrefix(index.blocks, null, keys, replicaMask([0, 1, 2], index.blocks.words), 0, out);
      assert.deepEqual([...out], [0, 0, 0]);
    });

    test('a replica that comes back up is cold', () => {
      const router = make(2);
      const toks = tokens(4, 1_600);
      const d = router.route(request('a', toks), 0);
      feeds[mode](router, d, toks);
      router.onFinished('a', 0);
      router.markDown(d.replica);
      router.markUp(d.replica);
      assert.equal(router.snapshot().replicas.find((r) => r.name === d.replica)!.indexedBlocks, 0);
      assert.equal(router.route(request('b', toks), 1).cachedTokens, 0);
    });
  });
}

describe('events mode forgets on removal and clear', () => {
  test('BlockRemoved cuts the prefix at the removed block; AllBlocksCleared forgets all', () => {
    const router = new Router({ replicas: ['a', 'b'], overlayTtlMs: 0 });
    const toks = tokens(5, 1_600);
    const keys = computeBlockKeys(toks, BLOCK);
    router.applyEvents('a', [stored(keys, toks)], 0);
    assert.equal(router.route(request('q1', toks), 0).cachedTokens, 1_600);
    router.onFinished('q1', 0);
    router.applyEvents('a', [{ type: 'BlockRemoved', blockKeys: [keys[50]!] }], 1);
    const d = router.route(request('q2', toks), 1);
    assert.equal(d.replica, 'a');
    assert.equal(d.cachedTokens, 50 * BLOCK);
    router.onFinished('q2', 1);
    router.applyEvents('a', [{ type: 'AllBlocksCleared' }], 2);
    assert.equal(router.route(request('q3', toks), 2).cachedTokens, 0);
    assert.equal(router.snapshot().replicas[0]!.indexedBlocks, 0);
  });
});

describe('approx mode forgets beyond capacity', () => {
  test('LRU keeps the most recent prompts within capacity, shared roots last', () => {
    const index = makePrefixIndex('approx', 1, { capacityBlocks: 100 });
    const a = computeBlockKeys(tokens(6, 960), BLOCK); // 60 blocks
    const b = computeBlockKeys(tokens(7, 960), BLOCK); // 60 blocks
    index.recordRoute(0, a);
    index.recordRoute(0, b);
    assert.equal(index.blockCount(0), 100);
    const out = new Int32Array(1);
    matchPrefix(index.blocks, null, b, replicaMask([0], 2), 0, out);
    assert.equal(out[0], 60, 'the newest prompt is whole');
    matchPrefix(index.blocks, null, a, replicaMask([0], 2), 0, out);
    assert.equal(out[0], 40, 'the oldest lost its tail first, so its root still matches');
    index.recordRoute(0, computeBlockKeys(tokens(8, 1_600), BLOCK));
    matchPrefix(index.blocks, null, a, replicaMask([0], 2), 0, out);
    assert.equal(out[0], 0);
  });

  test('events are ignored in approx mode', () => {
    const index = makePrefixIndex('approx', 1);
    const toks = tokens(9, 160);
    assert.equal(index.applyEvents(0, [stored(computeBlockKeys(toks, BLOCK), toks)]), 0);
    assert.equal(index.blockCount(0), 0);
  });
});

describe('predict-on-route overlay', () => {
  test('siblings stick to a just-routed replica until the TTL runs out', () => {
    const router = new Router({ replicas: ['a', 'b', 'c', 'd'], overlayTtlMs: 2_000, seed: 11 });
    const shared = tokens(12, 3_200);
    const first = router.route(request('s0', shared.concat(tokens(13, 160))), 1_000);
    for (let i = 1; i < 6; i++) {
      router.onFirstToken(`s${i - 1}`, 1_000 + i);
      const d = router.route(request(`s${i}`, shared.concat(tokens(13 + i, 160))), 1_000 + i);
      assert.equal(d.replica, first.replica);
      assert.equal(d.cachedTokens, 3_200);
    }
    router.onFirstToken('s5', 2_999);
    assert.equal(router.route(request('late', shared), 2_999).cachedTokens, 3_200, 'still warm');
    router.onFinished('late', 2_999);
    assert.equal(router.route(request('after', shared), 3_006).cachedTokens, 0, 'expired');
    assert.equal(router.snapshot().overlayPredictions > 0, true);
  });

  test('a disabled overlay predicts nothing', () => {
    const router = new Router({ replicas: ['a', 'b'], overlayTtlMs: 0 });
    const toks = tokens(20, 800);
    router.route(request('x', toks), 0);
    assert.equal(router.route(request('y', toks), 1).cachedTokens, 0);
  });

  test('an engine that clears its cache drops its predictions', () => {
    const router = new Router({ replicas: ['a'], overlayTtlMs: 2_000 });
    const toks = tokens(21, 800);
    router.route(request('x', toks), 0);
    router.applyEvents('a', [{ type: 'AllBlocksCleared' }], 1);
    assert.equal(router.route(request('y', toks), 2).cachedTokens, 0);
  });
});

describe('the index table', () => {
  test('SlotTable agrees with a Map under random inserts, removals and reserves', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(
            fc.constantFrom('insert', 'remove', 'reserve'),
            fc.integer({ min: 0, max: 3_000 }),
          ),
          { maxLength: 3_000 },
        ),
        (ops) => {
          const table = new SlotTable(2);
          const model = new Map<number, number>();
          for (const [kind, k] of ops) {
            const key = k * 2 ** 20 + (k % 7); // spread over both 32-bit halves
            if (kind === 'reserve') {
              table.reserve(k);
              assert.ok(table.slots >= 2 * k);
            } else if (kind === 'insert') {
              const slot = table.insert(key);
              table.f64[slot * 2 + 1] = k;
              model.set(key, k);
            } else {
              const slot = table.find(key);
              assert.equal(slot >= 0, model.has(key));
              if (slot >= 0) table.removeAt(slot);
              model.delete(key);
            }
          }
          assert.equal(table.size, model.size);
          for (const [key, v] of model) {
            const slot = table.find(key);
            assert.ok(slot >= 0);
            assert.equal(table.f64[slot * 2 + 1], v);
          }
        },
      ),
      { numRuns: 40 },
    );
  });

  test('SlotTable.reserve(n): n keys then go in without the table growing', () => {
    const table = new SlotTable(2);
    table.reserve(50_000);
    const slots = table.slots;
    for (let k = 0; k < 50_000; k++) table.insert(k * 2 ** 20 + 3);
    assert.equal(table.slots, slots);
    table.insert(-5);
    assert.equal(table.size, 50_001);
  });

  test('the prefix walk equals a per-replica reference walk', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 80 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 79 }), fc.integer({ min: 0, max: 60 })), {
          maxLength: 200,
        }),
        (replicas, holdings) => {
          const keys = computeBlockKeys(tokens(replicas, 60 * BLOCK), BLOCK);
          const index = new BlockIndex(replicas);
          for (const [r, b] of holdings) if (r < replicas) index.add(keys[b]!, r);
          const out = new Int32Array(replicas).fill(-1);
          const ids = Array.from({ length: replicas }, (_, i) => i);
          matchPrefix(index, null, keys, replicaMask(ids, index.words), 0, out);
          for (const r of ids) {
            let expected = 0;
            while (expected < keys.length && index.has(keys[expected]!, r)) expected++;
            assert.equal(out[r], expected);
          }
        },
      ),
      { numRuns: 100 },
    );
  });

  test('bitsets widen past 64 replicas without losing entries', () => {
    const index = new BlockIndex(2);
    index.add(123, 1);
    index.ensureReplicas(130);
    index.add(123, 129);
    assert.ok(index.has(123, 1));
    assert.ok(index.has(123, 129));
    assert.equal(index.words, 6);
    index.clearReplica(1);
    assert.ok(!index.has(123, 1));
    assert.ok(index.has(123, 129));
    assert.ok(index.remove(123, 129));
    assert.equal(index.size, 0);
  });
});

describe('foreign engine hashes', () => {
  test('stored blocks are keyed on their token ids; removals map back by engine hash', () => {
    const toks = tokens(30, 96); // 6 blocks
    const ours = computeBlockKeys(toks, BLOCK, { cacheSalt: 'tenant-a' });
    const engineHash = (i: number): bigint => 2n ** 60n + BigInt(i) * 977n;
    const map = new ForeignKeyMap();
    const events = map.translate([
      {
        type: 'BlockStored',
        blockHashes: [0, 1, 2].map(engineHash),
        parentBlockHash: null,
        tokenIds: toks.slice(0, 48),
        blockSize: BLOCK,
        loraName: null,
        cacheSalt: 'tenant-a',
      },
      {
        type: 'BlockStored',
        blockHashes: [3, 4, 5].map(engineHash),
        parentBlockHash: engineHash(2),
        tokenIds: toks.slice(48),
        blockSize: BLOCK,
        loraName: null,
        cacheSalt: null,
      },
      { type: 'BlockRemoved', blockHashes: [engineHash(5), 999n] },
    ]);
    assert.deepEqual(events[0]!.type === 'BlockStored' && events[0]!.blockKeys, ours.slice(0, 3));
    assert.deepEqual(events[1]!.type === 'BlockStored' && events[1]!.blockKeys, ours.slice(3));
    assert.deepEqual(events[2], { type: 'BlockRemoved', blockKeys: [ours[5]] });
    assert.equal(map.size, 5);

    const orphan = map.translate([
      {
        type: 'BlockStored',
        blockHashes: ['ab12'],
        parentBlockHash: 'unknown',
        tokenIds: toks.slice(0, 16),
        blockSize: BLOCK,
        loraName: null,
        cacheSalt: null,
      },
    ]);
    assert.deepEqual(orphan, []);
    assert.equal(map.unresolvedBlocks, 1);
    assert.deepEqual(map.translate([{ type: 'AllBlocksCleared' }]), [{ type: 'AllBlocksCleared' }]);
    assert.equal(map.size, 0);
  });

  for (const reserved of [null, 100_000]) {
    test(`a router fed foreign events routes to the owner and applies removals (engine blocks reserved: ${reserved})`, () => {
      const router = new Router({ replicas: ['x', 'y'], overlayTtlMs: 0 });
      if (reserved !== null) router.reserveEngineBlocks('y', reserved);
      const toks = tokens(31, 320);
      const keys = computeBlockKeys(toks, BLOCK);
      const hashes = keys.map((k) => toWireHash(k) ^ 0xffn); // differs from ours
      router.applyForeignEvents(
        'y',
        [
          {
            type: 'BlockStored',
            blockHashes: hashes,
            parentBlockHash: null,
            tokenIds: toks,
            blockSize: BLOCK,
            loraName: null,
            cacheSalt: null,
          },
        ],
        0,
      );
      const d = router.route(request('q', toks), 0);
      assert.equal(d.replica, 'y');
      assert.equal(d.cachedTokens, 320);
      router.onFinished('q', 0);
      router.applyForeignEvents('y', [{ type: 'BlockRemoved', blockHashes: hashes.slice(10) }], 1);
      assert.equal(router.route(request('r', toks), 1).cachedTokens, 160);
    });
  }

  test('two engine hashes for the same tokens: the blocks stay cached until both are removed', () => {
    // vLLM hashes extra keys (e.g. an image's hash) into its block hash; the token ids, which
    // the router keys on, can be the same.
    const router = new Router({ replicas: ['x', 'y'], overlayTtlMs: 0 });
    const toks = tokens(41, 64);
    const first = computeBlockKeys(toks, BLOCK).map((k) => toWireHash(k) ^ 0xf0n);
    const second = first.map((h) => h ^ 0xf00n);
    const stored = (blockHashes: bigint[]): ForeignKvEvent => ({
      type: 'BlockStored',
      blockHashes,
      parentBlockHash: null,
      tokenIds: toks,
      blockSize: BLOCK,
      loraName: null,
      cacheSalt: null,
    });
    const cachedOnY = (id: string, nowMs: number): number => {
      const d = router.route(request(id, toks), nowMs);
      router.onFinished(id, nowMs);
      return d.replica === 'y' ? d.cachedTokens : 0;
    };
    // Applied in one batch and in two: the count does not depend on how events are batched.
    router.applyForeignEvents('y', [stored(first), stored(second)], 0);
    assert.equal(router.applyForeignEvents('y', [stored(second)], 0), 0);
    router.applyForeignEvents('y', [{ type: 'BlockRemoved', blockHashes: first }], 1);
    assert.equal(cachedOnY('a', 1), 64);
    router.applyForeignEvents('y', [stored(first)], 2);
    router.applyForeignEvents('y', [{ type: 'BlockRemoved', blockHashes: second }], 2);
    assert.equal(cachedOnY('b', 2), 64);
    assert.equal(
      router.applyForeignEvents('y', [{ type: 'BlockRemoved', blockHashes: first }], 3),
      4,
    );
    assert.equal(cachedOnY('c', 3), 0);
    // A clear forgets the second hashes too: one removal after it empties the blocks.
    router.applyForeignEvents(
      'y',
      [stored(first), stored(second), { type: 'AllBlocksCleared' }],
      4,
    );
    router.applyForeignEvents('y', [stored(first)], 4);
    router.applyForeignEvents('y', [{ type: 'BlockRemoved', blockHashes: first }], 5);
    assert.equal(cachedOnY('d', 5), 0);
  });

  test('reserveEngineBlocks: an unknown replica is an error; approx mode has no engine hashes to make room for', () => {
    assert.throws(
      () => new Router({ replicas: ['x'] }).reserveEngineBlocks('z', 10),
      /unknown replica 'z'/,
    );
    const approx = new Router({ replicas: ['x'], indexMode: 'approx' });
    assert.doesNotThrow(() => approx.reserveEngineBlocks('z', 10));
  });
});
