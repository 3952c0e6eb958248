/**
 * `decodeUtf8` gives exactly the string `Buffer.toString('utf8')` gives: on fixed cases (a
 * byte order mark, malformed and overlong sequences, encoded surrogates, the largest code
 * point and one past it), by property on the bytes of any string of code points (lone
 * surrogates included), on random bytes, and on valid text with random bytes cut or spliced in.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { parseJson } from '../../src/openai/http.ts';
import { decodeUtf8 } from '../../src/openai/utf8.ts';

const same = (bytes: Buffer) => assert.equal(decodeUtf8(bytes), bytes.toString('utf8'));

test('fixed cases decode as toString does', () => {
  const cases: number[][] = [
    [],
    [0x41],
    [0xef, 0xbb, 0xbf, 0x41], // BOM kept
    [0xc2, 0xa9], // ©
    [0xf0, 0x9f, 0x98, 0x80], // 😀
    [0xed, 0xa0, 0x80], // an encoded surrogate: invalid
    [0xc0, 0x80], // overlong NUL
    [0xe0, 0x80, 0xaf], // overlong '/'
    [0xf4, 0x8f, 0xbf, 0xbf], // U+10FFFF
    [0xf4, 0x90, 0x80, 0x80], // past U+10FFFF
    [0x61, 0xe2, 0x82], // cut mid-sequence
    [0x80, 0x61, 0xff, 0xfe],
    [0x00, 0x7f, 0xc2, 0x80],
  ];
  for (const c of cases) same(Buffer.from(c));
  assert.equal(decodeUtf8(Buffer.from('a©b😀c')), 'a©b😀c');
});

test('a view into a larger buffer decodes its own bytes only', () => {
  const whole = Buffer.from('xx{"a":"é"}yy');
  same(whole.subarray(2, whole.length - 2));
  assert.equal(decodeUtf8(whole.subarray(1, 3)), 'x{');
});

test('property: the bytes of any string (lone surrogates too)', () => {
  fc.assert(
    fc.property(fc.string({ unit: 'binary', maxLength: 200 }), (s) => {
      same(Buffer.from(s, 'utf8'));
    }),
    { numRuns: 5000 },
  );
  fc.assert(
    fc.property(fc.string({ unit: 'grapheme', maxLength: 100 }), (s) => {
      assert.equal(decodeUtf8(Buffer.from(s, 'utf8')), s);
    }),
    { numRuns: 2000 },
  );
});

test('property: random bytes, and valid text with bytes spliced in or cut off', () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => same(Buffer.from(bytes))),
    { numRuns: 5000 },
  );
  fc.assert(
    fc.property(
      fc.string({ unit: 'binary', maxLength: 80 }),
      fc.nat(),
      fc.uint8Array({ maxLength: 4 }),
      fc.nat(),
      (s, at, junk, cut) => {
        const b = Buffer.from(s, 'utf8');
        const i = b.length === 0 ? 0 : at % (b.length + 1);
        const spliced = Buffer.concat([b.subarray(0, i), junk, b.subarray(i)]);
        same(spliced);
        same(spliced.subarray(0, spliced.length - (cut % (spliced.length + 1))));
      },
    ),
    { numRuns: 5000 },
  );
});

test('parseJson reads a body with non-ASCII text as JSON.parse of toString does', () => {
  const doc = { messages: [{ role: 'user', content: 'Licence © 2024 — naïve 😀 \u{10ffff}' }] };
  const raw = Buffer.from(JSON.stringify(doc));
  assert.deepEqual(parseJson(raw), doc);
  assert.deepEqual(parseJson(raw), JSON.parse(raw.toString('utf8')));
  // A malformed byte inside a string is V8's replacement character, as before.
  const bad = Buffer.concat([Buffer.from('{"a":"x'), Buffer.from([0xff]), Buffer.from('y"}')]);
  assert.deepEqual(parseJson(bad), { a: 'x\ufffdy' });
  assert.throws(() => parseJson(Buffer.from('{"a": ©}')), { code: 'ERR_BAD_JSON' });
});
