/**
 * KeyRing (src/kv/keyRing.ts) against the KeyLru it replaces in the CPU tier: the same answers
 * and the same keys in the same order after any sequence of stores (with the eviction a full
 * tier makes), moves, removals, evictions and clears, through the ring's compactions.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { KeyLru } from '../../src/kv/keyLru.ts';
import { KeyRing, NO_OLDEST } from '../../src/kv/keyRing.ts';

type Op =
  | { kind: 'touch'; key: number }
  | { kind: 'delete'; key: number }
  | { kind: 'pop' }
  | { kind: 'clear' };

/** 53-bit keys as the simulator has them, from a small pool, half sharing their low 32 bits. */
const key = fc.oneof(
  fc.integer({ min: 0, max: 120 }),
  fc.integer({ min: 0, max: 120 }).map((k) => 2 ** 52 + k * 4_294_967_296),
);
const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 60, arbitrary: key.map((k) => ({ kind: 'touch' as const, key: k })) },
  { weight: 20, arbitrary: key.map((k) => ({ kind: 'delete' as const, key: k })) },
  { weight: 10, arbitrary: fc.constant({ kind: 'pop' as const }) },
  // Rare: a clear empties the ring, and the dead entries that make it compact with it.
  { weight: 1, arbitrary: fc.constant({ kind: 'clear' as const }) },
);

test('property: KeyRing keeps the order KeyLru keeps, operation by operation', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 60 }),
      // Keys drawn from the first `pool` of each kind: a small pool moves held keys often,
      // leaving dead entries behind the oldest live one until the ring compacts.
      fc.integer({ min: 2, max: 121 }),
      fc.array(op, { maxLength: 800, size: 'max' }),
      (capacity, pool, ops) => {
        // As the CPU tier holds them: one key past the capacity, evicted at once.
        const ring = new KeyRing(capacity + 1);
        const lru = new KeyLru(capacity + 1);
        const inPool = (k: number): number =>
          k < 2 ** 52 ? k % pool : 2 ** 52 + ((k - 2 ** 52) % (pool * 4_294_967_296));
        for (const o of ops) {
          if (o.kind === 'touch') {
            const k = inPool(o.key);
            assert.equal(ring.touch(k), lru.touch(k));
            if (lru.size > capacity) assert.equal(ring.popOldest(), lru.popOldest());
          } else if (o.kind === 'delete') {
            const k = inPool(o.key);
            assert.equal(ring.delete(k), lru.delete(k));
          } else if (o.kind === 'pop') {
            assert.equal(ring.popOldest(), lru.popOldest());
          } else {
            ring.clear();
            lru.clear();
          }
          assert.equal(ring.size, lru.size);
        }
        assert.deepEqual(ring.keys(), lru.keys());
        for (let k = 0; k <= 120; k++) {
          assert.equal(ring.has(k), lru.has(k));
          assert.equal(ring.has(2 ** 52 + k * 4_294_967_296), lru.has(2 ** 52 + k * 4_294_967_296));
        }
      },
    ),
    { numRuns: 300, seed: 55 },
  );
});

test('KeyRing: moves fill the ring with dead entries, and its compactions keep the order', () => {
  const ring = new KeyRing(10);
  const lru = new KeyLru(10);
  for (let k = 0; k < 10; k++) {
    ring.touch(k);
    lru.touch(k);
  }
  // Each round moves every key to the back in a new order: 10 dead entries a round, so the ring
  // (32 entries for 10 keys) compacts every few rounds.
  for (let round = 0; round < 20; round++) {
    for (let i = 0; i < 10; i++) {
      const k = (i * 3 + round) % 10;
      assert.equal(ring.touch(k), false);
      lru.touch(k);
    }
    assert.deepEqual(ring.keys(), lru.keys());
  }
  for (let i = 0; i < 10; i++) assert.equal(ring.popOldest(), lru.popOldest());
  assert.equal(ring.popOldest(), NO_OLDEST);
  assert.equal(ring.size, 0);
});

test('KeyRing refuses a key past its bound, and a bound below one', () => {
  const ring = new KeyRing(2);
  ring.touch(1);
  ring.touch(2);
  assert.equal(ring.touch(2), false, 'a held key moves, whatever the bound');
  assert.throws(() => ring.touch(3), RangeError);
  assert.throws(() => new KeyRing(0), RangeError);
});

test('KeyRing: a filter cell past 255 keys stays "maybe", and every answer stays exact', () => {
  // Keys whose two 32-bit halves fold to one value: one hash, one home slot, one filter cell.
  const sameCell = (hi: number): number => hi * 4_294_967_296 + ((0x5bd1e995 ^ hi) >>> 0);
  const ring = new KeyRing(400);
  for (let hi = 0; hi < 300; hi++) assert.equal(ring.touch(sameCell(hi)), true);
  for (let hi = 0; hi < 300; hi += 2) assert.equal(ring.delete(sameCell(hi)), true);
  for (let hi = 0; hi < 300; hi++) assert.equal(ring.has(sameCell(hi)), hi % 2 === 1);
  // 150 deletions and 105 evictions: a cell counted down past its saturation would be 0 here,
  // with 45 keys still held.
  for (let hi = 1; hi < 210; hi += 2) assert.equal(ring.popOldest(), sameCell(hi));
  for (let hi = 211; hi < 300; hi += 2) assert.equal(ring.has(sameCell(hi)), true);
  for (let hi = 211; hi < 300; hi += 2) assert.equal(ring.popOldest(), sameCell(hi));
  assert.equal(ring.has(sameCell(1)), false);
  assert.equal(ring.delete(sameCell(3)), false);
  assert.equal(ring.touch(sameCell(5)), true);
  assert.deepEqual(ring.keys(), [sameCell(5)]);
});
