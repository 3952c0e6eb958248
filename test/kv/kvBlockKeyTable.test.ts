import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { BlockKeyTable, NO_KEY } from '../../src/kv/blockKeyTable.ts';

test('the key table behaves like a Map under random adds and deletes, collisions included', () => {
  // Keys that share their low 32 bits land in the same bucket: chains of several blocks.
  const key = fc.tuple(fc.integer({ min: 0, max: 7 }), fc.integer({ min: 0, max: 2 ** 21 - 1 }));
  const toKey = ([lo, hi]: [number, number]) => hi * 2 ** 32 + ((lo * 0x9e3779b9) >>> 0);
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 12 }),
      fc.array(fc.tuple(fc.boolean(), key), { maxLength: 200, size: 'max' }),
      (numBlocks, ops) => {
        const table = new BlockKeyTable(numBlocks);
        const model = new Map<number, number>();
        // Blocks holding no key; an added key takes the lowest, a deleted one gives it back.
        const free = Array.from({ length: numBlocks }, (_, b) => b);
        for (const [isAdd, k] of ops) {
          const keyValue = toKey(k);
          if (isAdd && !model.has(keyValue) && free.length > 0) {
            const block = free.shift()!;
            table.add(keyValue, block);
            model.set(keyValue, block);
          } else {
            const block = model.get(keyValue);
            assert.equal(table.delete(keyValue), model.delete(keyValue));
            if (block !== undefined) free.push(block);
          }
          assert.equal(table.size, model.size);
          for (const [mk, mv] of model) assert.equal(table.get(mk), mv);
          assert.deepEqual(new Set(table.keys()), new Set(model.keys()));
          // A block holds a key exactly while the table maps that key to it.
          const keyOf = new Map([...model].map(([k2, b]) => [b, k2]));
          for (let b = 0; b < numBlocks; b++) assert.equal(table.keyOf[b], keyOf.get(b) ?? NO_KEY);
        }
        assert.equal(table.get(2 ** 52 + 5), -1);
        table.clear();
        assert.equal(table.size, 0);
        assert.equal(table.has(toKey([0, 0])), false);
        assert.ok(table.keyOf.every((k) => k === NO_KEY));
      },
    ),
    { numRuns: 2000 },
  );
});

test('a key already present or a block already holding a key is refused', () => {
  const table = new BlockKeyTable(2);
  table.add(7, 0);
  assert.equal(table.addIfAbsent(7, 1), false);
  assert.equal(table.keyOf[1], NO_KEY);
  assert.throws(() => table.add(7, 1), { message: 'key 7 is already in the table' });
  assert.throws(() => table.add(9, 0), { message: 'block 0 already holds a key' });
  assert.equal(table.get(9), -1);
  assert.equal(table.size, 1);
});

test('deleteBlock removes the key a block holds, as delete of that key does, collisions included', () => {
  // Keys sharing their low 32 bits make long chains, so deletes unlink blocks from their middle.
  const key = fc.tuple(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 2 ** 21 - 1 }));
  const toKey = ([lo, hi]: [number, number]) => hi * 2 ** 32 + ((lo * 0x9e3779b9) >>> 0);
  const op = fc.oneof(
    fc.record({ kind: fc.constant('add' as const), key }),
    fc.record({ kind: fc.constant('delete' as const), key }),
    fc.record({ kind: fc.constant('deleteBlock' as const), block: fc.nat(11) }),
  );
  fc.assert(
    fc.property(fc.array(op, { maxLength: 200, size: 'max' }), (ops) => {
      const numBlocks = 12;
      const byKey = new BlockKeyTable(numBlocks);
      const byBlock = new BlockKeyTable(numBlocks);
      const model = new Map<number, number>();
      const free = Array.from({ length: numBlocks }, (_, b) => b);
      for (const o of ops) {
        if (o.kind === 'add') {
          const k = toKey(o.key);
          if (model.has(k) || free.length === 0) continue;
          const block = free.shift()!;
          byKey.add(k, block);
          byBlock.add(k, block);
          model.set(k, block);
          continue;
        }
        let k: number | undefined;
        if (o.kind === 'delete') k = toKey(o.key);
        else k = [...model].find(([, b]) => b === o.block)?.[0];
        const present = k !== undefined && model.has(k);
        const block = present ? model.get(k!)! : -1;
        const viaBlock = o.kind === 'deleteBlock' ? o.block : block;
        assert.equal(viaBlock >= 0 && byBlock.deleteBlock(viaBlock), present);
        assert.equal(k !== undefined && byKey.delete(k), present);
        if (present) {
          model.delete(k!);
          free.push(block);
        }
        assert.equal(byBlock.size, model.size);
        for (const [mk, mv] of model) assert.equal(byBlock.get(mk), mv);
        assert.deepEqual(byBlock.keys(), byKey.keys());
        assert.deepEqual([...byBlock.keyOf], [...byKey.keyOf]);
      }
    }),
    { numRuns: 1000 },
  );
});
