/**
 * KeyLru against the Map it replaces (insertion order, a touch = delete then set, the oldest =
 * the first key): the same keys in the same order after any sequence of operations, including
 * growth past the first slots and a clear.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { BlockKey } from '../../src/kv/blockKey.ts';
import { KeyLru, NO_OLDEST } from '../../src/kv/keyLru.ts';

type Op =
  | { kind: 'touch'; key: number }
  | { kind: 'add'; key: number }
  | { kind: 'delete'; key: number }
  | { kind: 'pop' }
  | { kind: 'clear' };

/** Keys as the simulator has them: 53-bit numbers, some small, from a small pool to collide. */
const key = fc.oneof(
  fc.integer({ min: 0, max: 300 }),
  fc.integer({ min: 0, max: 300 }).map((k) => 2 ** 52 + k * 4_294_967_296),
);
const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 8, arbitrary: key.map((k) => ({ kind: 'touch' as const, key: k })) },
  { weight: 2, arbitrary: key.map((k) => ({ kind: 'add' as const, key: k })) },
  { weight: 3, arbitrary: key.map((k) => ({ kind: 'delete' as const, key: k })) },
  { weight: 3, arbitrary: fc.constant({ kind: 'pop' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'clear' as const }) },
);

test('property: KeyLru keeps the order a Map keeps, operation by operation', () => {
  fc.assert(
    fc.property(fc.array(op, { maxLength: 600 }), (ops) => {
      const lru = new KeyLru();
      const model = new Map<BlockKey, true>();
      for (const o of ops) {
        if (o.kind === 'touch') {
          const added = !model.delete(o.key);
          model.set(o.key, true);
          assert.equal(lru.touch(o.key), added);
        } else if (o.kind === 'add') {
          const added = !model.has(o.key);
          model.set(o.key, true); // Map.set keeps a held key's place
          assert.equal(lru.addIfAbsent(o.key), added);
        } else if (o.kind === 'delete') {
          assert.equal(lru.delete(o.key), model.delete(o.key));
        } else if (o.kind === 'pop') {
          const first = model.keys().next();
          const expected = first.done ? NO_OLDEST : first.value;
          if (!first.done) model.delete(first.value);
          assert.equal(lru.oldest(), expected);
          assert.equal(lru.popOldest(), expected);
        } else {
          model.clear();
          lru.clear();
        }
        assert.equal(lru.size, model.size);
      }
      assert.deepEqual(lru.keys(), [...model.keys()]);
      for (const k of model.keys()) assert.ok(lru.has(k));
    }),
    { numRuns: 300, seed: 55 },
  );
});

test('KeyLru grows past its first slots in order', () => {
  const lru = new KeyLru();
  for (let k = 0; k < 5_000; k++) lru.touch(k);
  lru.touch(0); // 0 becomes the most recent
  assert.equal(lru.size, 5_000);
  assert.equal(lru.oldest(), 1);
  assert.equal(lru.keys().at(-1), 0);
});
