/**
 * TierKeys (src/router/index/tierKeys.ts), the router's set of (replica, block key) pairs for the
 * CPU tiers, against the BlockIndex it replaced there: the same answers to every has, add,
 * remove, clear and count, whatever the sequence of operations.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { BlockIndex } from '../../src/router/index/blockIndex.ts';
import { TierKeys } from '../../src/router/index/tierKeys.ts';

const REPLICAS = 3;
/**
 * Keys from a small pool, so that adds, removes and re-adds meet: half of them share their low
 * 32 bits (the bits a slot is hashed from), so they share a home slot and probe past each other,
 * and removals must shift the runs after them back.
 */
const POOL = Array.from({ length: 48 }, (_, i) =>
  i % 2 === 0 ? 7 + Math.floor(i / 2) * 2 ** 32 : 2 ** 40 + i * 977,
);
/** Adds and removes, and now and then a replica's clear (which empties its whole set). */
const op = fc.oneof(
  {
    weight: 30,
    arbitrary: fc.record({
      kind: fc.constantFrom('add', 'remove'),
      key: fc.integer({ min: 0, max: POOL.length - 1 }),
      replica: fc.integer({ min: 0, max: REPLICAS - 1 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('clear'),
      key: fc.constant(0),
      replica: fc.integer({ min: 0, max: REPLICAS - 1 }),
    }),
  },
);

test('property: TierKeys answers as the BlockIndex it replaced', () => {
  fc.assert(
    fc.property(fc.array(op, { maxLength: 600, size: 'max' }), (ops) => {
      const want = new BlockIndex(REPLICAS);
      const got = new TierKeys(REPLICAS);
      for (const { kind, key, replica } of ops) {
        const k = POOL[key]!;
        if (kind === 'add') assert.equal(got.add(k, replica), want.add(k, replica));
        else if (kind === 'remove') assert.equal(got.remove(k, replica), want.remove(k, replica));
        else {
          got.clearReplica(replica);
          want.clearReplica(replica);
        }
      }
      let pairs = 0;
      for (let r = 0; r < REPLICAS; r++) {
        assert.equal(got.blockCount(r), want.blockCount(r));
        pairs += want.blockCount(r);
        for (const k of POOL) assert.equal(got.has(k, r), want.has(k, r), `key ${k} replica ${r}`);
        const held = POOL.filter((k) => want.has(k, r)).sort((a, b) => a - b);
        assert.deepEqual(
          got.keys(r).sort((a, b) => a - b),
          held,
        );
      }
      assert.equal(got.size, pairs);
      assert.equal(got.size === 0, want.size === 0);
    }),
    { numRuns: 300, seed: 55 },
  );
});

test('TierKeys grows past its first table and keeps every key through churn', () => {
  const tier = new TierKeys(1);
  const key = (i: number): number => 2 ** 45 + i * 65_537;
  for (let i = 0; i < 5000; i++) assert.equal(tier.add(key(i), 0), true);
  assert.equal(tier.blockCount(0), 5000);
  // Churn as a full tier does: the oldest out, a new one in.
  for (let i = 0; i < 20_000; i++) {
    assert.equal(tier.remove(key(i), 0), true);
    assert.equal(tier.add(key(i + 5000), 0), true);
  }
  assert.equal(tier.blockCount(0), 5000);
  for (let i = 0; i < 25_000; i++) assert.equal(tier.has(key(i), 0), i >= 20_000);
  assert.equal(tier.has(key(1), 1), false, 'a replica never added holds nothing');
  assert.equal(tier.remove(key(1), 3), false);
});

test('TierKeys: a key on one replica is not on another, and a clear is per replica', () => {
  const tier = new TierKeys(2);
  tier.add(42, 0);
  tier.add(43, 1);
  assert.equal(tier.has(42, 1), false);
  assert.equal(tier.add(42, 0), false, 'held already');
  assert.equal(tier.size, 2);
  tier.clearReplica(0);
  assert.equal(tier.has(42, 0), false);
  assert.equal(tier.has(43, 1), true);
  assert.equal(tier.size, 1);
  // A replica past the ones sized for: added on demand.
  assert.equal(tier.add(44, 4), true);
  assert.equal(tier.blockCount(4), 1);
});
