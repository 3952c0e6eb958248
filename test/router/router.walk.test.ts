/** The prefix walk over the block index and the route overlay, each against a plain model. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { computeBlockKeys } from '../../src/kv/blockKey.ts';
import { BlockIndex, matchPrefix, RouteOverlay, replicaMask } from '../../src/router/index.ts';
import { BLOCK, tokens as tokenStream } from '../support/routing.ts';

const tokens = (seed: number, count: number): number[] => tokenStream(seed, count, 17, 90000);

/**
 * `count` chains of `blocks` block keys: chain c > 0 shares its first blocks with chain 0 (more
 * of them for higher c), so walks part ways and chains overlap in the index.
 */
function chains(count: number, blocks: number): number[][] {
  const base = tokens(1, blocks * BLOCK);
  return Array.from({ length: count }, (_, c) => {
    const shared = Math.floor((c * blocks) / count) * BLOCK;
    const toks = base.slice(0, shared).concat(tokens(100 + c, blocks * BLOCK - shared));
    return computeBlockKeys(toks, BLOCK);
  });
}

/** Every replica's match for `keys`, from the walk. */
function walk(
  index: BlockIndex,
  overlay: RouteOverlay | null,
  keys: number[],
  replicas: number,
  nowMs = 0,
): number[] {
  const out = new Int32Array(replicas).fill(-1);
  const ids = Array.from({ length: replicas }, (_, i) => i);
  matchPrefix(index, overlay, keys, replicaMask(ids, index.words), nowMs, out);
  return [...out];
}

/** Every replica's match for `keys`: the blocks from the start that `holds` says it has. */
function reference(
  keys: number[],
  replicas: number,
  holds: (block: number, replica: number) => boolean,
): number[] {
  return Array.from({ length: replicas }, (_, r) => {
    let blocks = 0;
    while (blocks < keys.length && holds(blocks, r)) blocks++;
    return blocks;
  });
}

describe('block index against a Map<key, Set<replica>> model', () => {
  // 6 chains of 1,500 blocks sharing prefixes (about 5,000 distinct keys). Compaction here runs
  // when a step asks for it; the next test has removals start it and later steps run during it.
  const CHAINS = chains(6, 1_500);
  /** Store, remove (often a whole chain), clear or compact, on replicas below `n`. */
  const op = (n: number) =>
    fc.oneof(
      {
        weight: 4,
        arbitrary: fc.record({
          kind: fc.constantFrom('store' as const, 'remove' as const),
          replica: fc.nat(n - 1),
          chain: fc.nat(CHAINS.length - 1),
          from: fc.oneof(fc.constant(0), fc.nat(1_499)),
          length: fc.oneof(fc.constant(1_500), fc.integer({ min: 1, max: 1_500 })),
        }),
      },
      {
        weight: 1,
        arbitrary: fc.record({ kind: fc.constant('clear' as const), replica: fc.nat(n - 1) }),
      },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant('compact' as const) }) },
    );
  // Few replicas make dead entries pile up (so compaction starts on its own); many, wide bitsets.
  const fleetAndOps = fc
    .oneof(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 4, max: 70 }))
    .chain((n) => fc.tuple(fc.constant(n), fc.array(op(n), { maxLength: 40 })));

  test('matches, sizes and block counts agree after every step, compaction included', () => {
    fc.assert(
      fc.property(fleetAndOps, ([n, ops]) => {
        const index = new BlockIndex(n);
        const model = new Map<number, Set<number>>();
        for (const o of ops) {
          if (o.kind === 'compact') index.compact();
          else if (o.kind === 'clear') {
            index.clearReplica(o.replica);
            for (const holders of model.values()) holders.delete(o.replica);
          } else {
            for (const key of CHAINS[o.chain]!.slice(o.from, o.from + o.length)) {
              const holders = model.get(key) ?? new Set<number>();
              model.set(key, holders);
              const changed: boolean =
                o.kind === 'store' ? index.add(key, o.replica) : index.remove(key, o.replica);
              assert.equal(
                changed,
                o.kind === 'store' ? !holders.has(o.replica) : holders.has(o.replica),
              );
              if (o.kind === 'store') holders.add(o.replica);
              else holders.delete(o.replica);
            }
          }
          for (const keys of CHAINS) {
            const holds = (b: number, r: number): boolean => model.get(keys[b]!)?.has(r) ?? false;
            assert.deepEqual(walk(index, null, keys, n), reference(keys, n, holds));
          }
          assert.equal(index.size, [...model.values()].filter((h) => h.size > 0).length);
          for (let r = 0; r < n; r++) {
            const held = [...model.values()].filter((h) => h.has(r)).length;
            assert.equal(index.blockCount(r), held);
          }
        }
        // Every entry that holds anything is where the key table says it is.
        const { arena } = index;
        for (let at = 0; at < arena.length; at++) {
          if (!arena.isEmpty(at)) assert.equal(index.locate(arena.keys[at]!), at);
        }
      }),
      { numRuns: 25 },
    );
  });

  test('compaction started by removals runs alongside later stores and removals', () => {
    // 8 unrelated chains of 1,000 blocks; removing 6 of them leaves 6,000 dead entries against
    // 2,000 live ones, which starts compaction; random whole-chain steps then run during it.
    const unrelated = Array.from({ length: 8 }, (_, i) =>
      computeBlockKeys(tokens(300 + i, 1_000 * BLOCK), BLOCK),
    );
    const step = fc.record({
      store: fc.boolean(),
      replica: fc.nat(1),
      chain: fc.nat(7),
      half: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(step, { maxLength: 12 }), (steps) => {
        const index = new BlockIndex(2);
        const model = new Map<number, Set<number>>();
        const apply = (store: boolean, replica: number, keys: number[]): void => {
          for (const key of keys) {
            const holders = model.get(key) ?? new Set<number>();
            model.set(key, holders);
            if (store) {
              index.add(key, replica);
              holders.add(replica);
            } else {
              index.remove(key, replica);
              holders.delete(replica);
            }
          }
        };
        for (const keys of unrelated) apply(true, 0, keys);
        for (const keys of unrelated.slice(0, 6)) apply(false, 0, keys);
        const check = (): void => {
          for (const keys of unrelated) {
            const holds = (b: number, r: number): boolean => model.get(keys[b]!)?.has(r) ?? false;
            assert.deepEqual(walk(index, null, keys, 2), reference(keys, 2, holds));
          }
          assert.equal(index.size, [...model.values()].filter((h) => h.size > 0).length);
        };
        check();
        for (const s of steps) {
          const keys = unrelated[s.chain]!;
          apply(s.store, s.replica, s.half ? keys.slice(500) : keys);
          check();
        }
        index.compact();
        check();
        assert.equal(index.arena.length, index.size);
      }),
      { numRuns: 15 },
    );
  });

  test('compaction drops dead entries and keeps chains contiguous, in order', () => {
    const [a, b, c] = [0, 1, 2].map((i) => computeBlockKeys(tokens(200 + i, 100 * BLOCK), BLOCK));
    const index = new BlockIndex(2);
    for (const key of [...a!, ...b!, ...c!]) index.add(key, 0);
    for (const key of b!) index.remove(key, 0);
    index.compact();
    assert.deepEqual([...index.arena.keys.subarray(0, index.arena.length)], [...a!, ...c!]);
    assert.deepEqual(walk(index, null, a!, 2), [100, 0]);
    assert.deepEqual(walk(index, null, b!, 2), [0, 0]);
    assert.deepEqual(walk(index, null, c!, 2), [100, 0]);
  });

  test('a chain removed and stored again is contiguous again, and its old entries are free', () => {
    const [keys] = chains(1, 200);
    const index = new BlockIndex(2);
    for (const key of keys!) index.add(key, 1);
    for (const key of keys!.slice(50)) index.remove(key, 1);
    assert.deepEqual(walk(index, null, keys!, 2), [0, 50]);
    assert.equal(index.size, 50);
    for (const key of keys!.slice(50)) index.add(key, 0);
    const at = keys!.slice(50).map((key) => index.locate(key));
    assert.deepEqual(
      at,
      at.map((_, i) => at[0]! + i),
    );
    for (let entry = 50; entry < 200; entry++) assert.ok(index.arena.isFree(entry));
    assert.deepEqual(walk(index, null, keys!, 2), [0, 50]);
  });
});

describe('the walk over a chain held in one or two bitset words', () => {
  // One chain of 300 blocks; a few replicas of a 70-replica fleet (four bitset words) hold
  // prefixes of it of their own lengths, so that the replicas still matching sit in one word or in
  // two, and one of them drops out in the middle of a stretch the others still hold.
  const KEYS = chains(1, 300)[0]!;
  const holder = fc.record({ replica: fc.nat(69), blocks: fc.nat(300) });
  test('every replica matches exactly the prefix it holds', () => {
    fc.assert(
      fc.property(fc.array(holder, { minLength: 1, maxLength: 4 }), (holders) => {
        const index = new BlockIndex(70);
        const held = new Map<number, number>();
        // Longest first, so that the chain's entries are stored in order, contiguous.
        for (const h of [...holders].sort((a, b) => b.blocks - a.blocks)) {
          for (let b = 0; b < h.blocks; b++) index.add(KEYS[b]!, h.replica);
          held.set(h.replica, Math.max(held.get(h.replica) ?? 0, h.blocks));
        }
        const holds = (b: number, r: number): boolean => b < (held.get(r) ?? 0);
        assert.deepEqual(walk(index, null, KEYS, 70), reference(KEYS, 70, holds));
      }),
      { numRuns: 300 },
    );
  });
});

describe('route overlay against a list of predictions', () => {
  const CHAINS = chains(4, 60);
  const prediction = fc.record({
    replica: fc.nat(9),
    chain: fc.nat(CHAINS.length - 1),
    fromBlock: fc.nat(59),
    afterMs: fc.integer({ min: 0, max: 400 }),
    /** 0: the replica restarts right after (one prediction in eight, on average). */
    restart: fc.nat(7),
  });

  test('a replica matches through blocks indexed or covered by a live prediction', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.nat(9), fc.nat(CHAINS.length - 1), fc.nat(59)), { maxLength: 30 }),
        fc.array(prediction, { maxLength: 30 }),
        fc.integer({ min: 0, max: 3_000 }),
        fc.boolean(),
        (holdings, predictions, queryAfterMs, expireFirst) => {
          const replicas = 10;
          const index = new BlockIndex(replicas);
          for (const [r, c, b] of holdings) index.add(CHAINS[c]![b]!, r);
          const overlay = new RouteOverlay(1_000);
          const live: {
            replica: number;
            keys: number[];
            fromBlock: number;
            expiresAtMs: number;
          }[] = [];
          let nowMs = 0;
          for (const p of predictions) {
            nowMs += p.afterMs;
            overlay.expire(nowMs);
            overlay.add(p.replica, CHAINS[p.chain]!, p.fromBlock, nowMs);
            live.push({ ...p, keys: CHAINS[p.chain]!, expiresAtMs: nowMs + 1_000 });
            if (p.restart === 0) {
              overlay.clearReplica(p.replica);
              for (const q of live) if (q.replica === p.replica) q.replica = -1;
            }
          }
          nowMs += queryAfterMs;
          if (expireFirst) overlay.expire(nowMs);
          for (const keys of CHAINS) {
            const holds = (b: number, r: number): boolean =>
              index.has(keys[b]!, r) ||
              live.some(
                (q) =>
                  q.replica === r &&
                  q.expiresAtMs > nowMs &&
                  b >= q.fromBlock &&
                  q.keys[b] === keys[b],
              );
            assert.deepEqual(
              walk(index, overlay, keys, replicas, nowMs),
              reference(keys, replicas, holds),
            );
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  test('first keys in one bucket of the filter: reclaiming one leaves the other found', () => {
    // Keys equal in their low 32 bits fall in the same bucket whatever the filter's size.
    const a = 5 * 2 ** 40 + 12_345;
    const b = 9 * 2 ** 40 + 12_345;
    const overlay = new RouteOverlay(1_000);
    overlay.addTail(1, [a, 1, 2], 0, 0);
    overlay.addTail(2, [b, 3, 4], 0, 500);
    assert.equal(overlay.newestStartingAt(a)?.replica, 1);
    assert.equal(overlay.newestStartingAt(b)?.replica, 2);
    overlay.expire(1_200);
    assert.equal(overlay.newestStartingAt(a), null);
    assert.equal(overlay.newestStartingAt(b)?.replica, 2);
    overlay.expire(1_600);
    assert.equal(overlay.newestStartingAt(b), null);
    assert.equal(overlay.pending, 0);
  });
});
