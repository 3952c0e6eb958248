/**
 * The piece encoder's word cache (`src/tokenizer/wordCache.ts`) against a Map: lookups by a
 * range of a longer text give what was stored for that piece, misses give undefined, it grows
 * past its first table and starts over once it holds its maximum.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { WordCache } from '../src/tokenizer/wordCache.ts';

describe('WordCache', () => {
  test('equals a Map, looked up by ranges of a surrounding text', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.string({ unit: 'binary', maxLength: 8 }), fc.nat(1000)), {
          maxLength: 3000,
        }),
        fc.string({ maxLength: 4 }),
        (entries, pad) => {
          const cache = new WordCache(1 << 20);
          const model = new Map<string, number | number[]>();
          for (const [piece, id] of entries) {
            if (model.has(piece)) continue;
            const ids = id % 3 === 0 ? [id, id + 1] : id;
            cache.set(piece, ids);
            model.set(piece, ids);
          }
          assert.equal(cache.size, model.size);
          for (const [piece] of entries) {
            const text = `${pad}${piece}${pad}`;
            assert.deepEqual(
              cache.get(text, pad.length, pad.length + piece.length),
              model.get(piece),
            );
            const other = `${piece}\u0000`;
            assert.equal(cache.get(other, 0, other.length), model.get(other));
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  test('starts over once full', () => {
    const cache = new WordCache(3);
    for (const w of ['a', 'b', 'c']) cache.set(w, w.charCodeAt(0));
    assert.equal(cache.size, 3);
    assert.equal(cache.get('xbx', 1, 2), 98);
    cache.set('d', 100);
    assert.equal(cache.size, 1);
    assert.equal(cache.get('a', 0, 1), undefined);
    assert.equal(cache.get('d', 0, 1), 100);
  });
});
