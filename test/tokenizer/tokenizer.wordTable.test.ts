/**
 * The tokenizer's word cache (src/tokenizer/wordTable.ts) against a Map keyed by the pieces as
 * strings, the structure it replaced: pieces found by ranges of a longer text, any UTF-16 code
 * units (lone surrogates included), pieces crowded onto few hashes, growth and the start-over
 * at its entry limit.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { WordTable } from '../../src/tokenizer/wordTable.ts';

/** Pieces from a small alphabet (many repeats and shared prefixes) or any code units at all. */
const piece = fc.oneof(
  fc.string({ unit: fc.constantFrom('a', 'b', ' ', 'é', '\ud83c', '\udf89'), maxLength: 6 }),
  fc.string({ unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)) }),
);
const ids = fc.array(fc.integer({ min: 0, max: 2 ** 31 - 1 }), { maxLength: 5 });

function idsOf(table: WordTable, entry: number): number[] {
  const out = [7]; // something before: appendIds appends
  table.appendIds(entry, out);
  return out.slice(1);
}

test('finds what was added, by any range of any text, as a Map of strings does', () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(piece, ids, fc.string({ maxLength: 3 }), fc.string({ maxLength: 3 })), {
        maxLength: 300,
      }),
      fc.integer({ min: 1, max: 400 }),
      (ops, maxEntries) => {
        const table = new WordTable(maxEntries);
        const model = new Map<string, number[]>();
        for (const [word, wordIds, before, after] of ops) {
          // The piece sits inside a longer text, as the scanner's range of a section does.
          const text = before + word + after;
          const start = before.length;
          const end = start + word.length;
          const entry = table.find(text, start, end);
          assert.equal(entry >= 0, model.has(word), `find(${JSON.stringify(word)})`);
          if (entry >= 0) {
            assert.deepEqual(idsOf(table, entry), model.get(word));
            continue;
          }
          if (model.size >= maxEntries) model.clear();
          const out = [1, 2, ...wordIds, 3];
          table.add(text, start, end, out, 2, 2 + wordIds.length);
          model.set(word, wordIds);
          assert.equal(table.size, model.size);
        }
        for (const [word, wordIds] of model) {
          const entry = table.find(word, 0, word.length);
          assert.ok(entry >= 0, `kept ${JSON.stringify(word)}`);
          assert.deepEqual(idsOf(table, entry), wordIds);
        }
      },
    ),
    { numRuns: 300 },
  );
});

test('holds 100,000 pieces past every growth, and a piece differing in one code unit is absent', () => {
  const table = new WordTable(1 << 20);
  for (let i = 0; i < 100_000; i++) {
    const word = `w${i.toString(36)}`;
    table.add(`<${word}>`, 1, word.length + 1, [i, -i >>> 1], 0, i % 3);
  }
  assert.equal(table.size, 100_000);
  for (let i = 0; i < 100_000; i += 7) {
    const word = `w${i.toString(36)}`;
    const entry = table.find(word, 0, word.length);
    assert.ok(entry >= 0, word);
    assert.deepEqual(idsOf(table, entry), [i, -i >>> 1].slice(0, i % 3));
    assert.equal(table.find(`${word}\u0000`, 0, word.length + 1), -1);
    assert.equal(table.find(`x${word.slice(1)}`, 0, word.length), -1);
  }
});

test('starts over at its entry limit, keeping the piece that overflowed it', () => {
  const table = new WordTable(3);
  for (const word of ['a', 'b', 'c']) table.add(word, 0, 1, [word.charCodeAt(0)], 0, 1);
  assert.equal(table.size, 3);
  table.add('d', 0, 1, [100], 0, 1);
  assert.equal(table.size, 1);
  assert.equal(table.find('a', 0, 1), -1);
  assert.deepEqual(idsOf(table, table.find('d', 0, 1)), [100]);
  assert.throws(() => new WordTable(0), /maxEntries must be >= 1/);
});
