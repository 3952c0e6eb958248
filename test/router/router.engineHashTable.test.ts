/**
 * EngineHashTable against a Map: random adds (`add`, `getOrAdd`), lookups and removals (`delete`,
 * `take`) of u64 BigInts, with numbers, strings and out-of-range BigInts mixed in; past the first
 * growths, so that backward-shift deletion runs over grown tables.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import {
  type EngineHash,
  EngineHashTable,
  NO_HANDLE,
} from '../../src/router/index/engineHashTable.ts';

/** Few distinct hashes per run, so that ops hit held ones; high and low words both vary. */
const hash = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.nat(3_000).map((h): EngineHash => (BigInt(h) * 0x9e3779b97f4a7c15n) % 2n ** 64n),
  },
  fc.nat(20).map((h): EngineHash => h),
  fc.nat(20).map((h): EngineHash => `h${h}`),
  fc.constantFrom<EngineHash>(-1n, 2n ** 64n, 2n ** 64n - 1n, 0n),
);
const op = fc.oneof(
  {
    weight: 30,
    arbitrary: fc.tuple(fc.constantFrom('add', 'getOrAdd', 'delete', 'take', 'get'), hash),
  },
  fc.tuple(fc.constant('reserve'), fc.nat(5_000)),
);

test('EngineHashTable answers as a Map under random adds, lookups, removals and reserves', () => {
  fc.assert(
    fc.property(fc.array(op, { maxLength: 4_000, size: 'max' }), (ops) => {
      const table = new EngineHashTable();
      const model = new Map<EngineHash, number>();
      let next = 0;
      for (const [kind, arg] of ops) {
        if (kind === 'reserve') {
          table.reserve(arg as number);
          assert.ok(table.slots >= 2 * (arg as number));
          continue;
        }
        const h = arg as EngineHash;
        const held = model.get(h) ?? NO_HANDLE;
        switch (kind) {
          case 'add':
            if (held === NO_HANDLE) {
              table.add(h, next);
              model.set(h, next++);
            }
            break;
          case 'getOrAdd':
            assert.equal(table.getOrAdd(h, next), held);
            if (held === NO_HANDLE) model.set(h, next++);
            break;
          case 'delete':
            table.delete(h);
            model.delete(h);
            break;
          case 'take':
            assert.equal(table.take(h), held);
            model.delete(h);
            break;
          case 'get':
            assert.equal(table.get(h), held);
            break;
        }
        assert.equal(table.size, model.size);
      }
      for (const [h, handle] of model) assert.equal(table.get(h), handle);
    }),
    { numRuns: 60 },
  );
});

test('EngineHashTable.reserve(n): n hashes then go in without the table growing', () => {
  const table = new EngineHashTable();
  table.reserve(40_000);
  const slots = table.slots;
  for (let i = 0; i < 40_000; i++) table.add((BigInt(i) * 0x9e3779b97f4a7c15n) % 2n ** 64n, i);
  assert.equal(table.slots, slots);
  for (let i = 0; i < 40_000; i += 997) {
    assert.equal(table.get((BigInt(i) * 0x9e3779b97f4a7c15n) % 2n ** 64n), i);
  }
});
