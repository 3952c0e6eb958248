import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { BlockKeyTable, NO_KEY } from '../src/kv/blockKeyTable.ts';

test('the key table behaves like a Map under random adds and deletes, collisions included, and keeps each block key', () => {
  // Keys that share their low 32 bits land on the same home slot and wrap around the table.
  const key = fc.tuple(fc.integer({ min: 0, max: 7 }), fc.integer({ min: 0, max: 2 ** 21 - 1 }));
  const toKey = ([lo, hi]: [number, number]) => hi * 2 ** 32 + ((lo * 0x9e3779b9) >>> 0);
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 12 }),
      fc.array(fc.tuple(fc.boolean(), key), { maxLength: 200 }),
      (maxEntries, ops) => {
        const table = new BlockKeyTable(maxEntries);
        const model = new Map<number, number>();
        // Blocks without a key, taken from the back after `i` turns (so ids get reused).
        const freeBlocks = Array.from({ length: maxEntries }, (_, b) => b);
        ops.forEach(([isAdd, k], i) => {
          const keyValue = toKey(k);
          if (isAdd && !model.has(keyValue) && model.size < maxEntries) {
            const at = i % freeBlocks.length;
            const block = freeBlocks.splice(at, 1)[0]!;
            table.add(keyValue, block);
            model.set(keyValue, block);
          } else {
            const block = model.get(keyValue);
            assert.equal(table.delete(keyValue), model.delete(keyValue));
            if (block !== undefined) freeBlocks.push(block);
          }
          assert.equal(table.size, model.size);
          for (const [mk, mv] of model) {
            assert.equal(table.get(mk), mv);
            assert.equal(table.keyOfBlock[mv], mk);
          }
          for (const b of freeBlocks) assert.equal(table.keyOfBlock[b], NO_KEY);
          assert.deepEqual(new Set(table.keys()), new Set(model.keys()));
        });
        assert.equal(table.get(2 ** 52 + 5), -1);
        table.clear();
        assert.equal(table.size, 0);
        assert.equal(table.has(toKey([0, 0])), false);
      },
    ),
    { numRuns: 2000 },
  );
});
