/**
 * The hand-written split scanners (`src/tokenizer/splitScanner.ts`) against the regexes they
 * replace: Llama 3's and Qwen3's `Split` pre-tokenizer as `@huggingface/tokenizers` runs it (its
 * own `pre_tokenize_text`, from the fixture models' tokenizer.json), and cl100k_base as
 * `gpt-tokenizer` runs it (`matchAll` of its pattern). Equal on fixed cases and, by property,
 * on 100,000 random strings per pattern of mixed scripts, digits, whitespace runs,
 * contractions, emoji and lone surrogates. Any other pattern gets no scanner.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { CL100K_TOKEN_SPLIT_REGEX } from 'gpt-tokenizer/encodingParams/constants';
import { type Json, library } from '../../src/tokenizer/hfLibrary.ts';
import {
  type PieceScanner,
  SPLIT_PATTERNS,
  scannerFor,
  splitPatternOf,
} from '../../src/tokenizer/splitScanner.ts';
import { LLAMA3_DIR, QWEN3_DIR } from '../support/tokenizerFixtures.ts';

const RANDOM_STRINGS = 100_000;

/** The fixture model's first pre-tokenizer stage (the Split), as the library builds it. */
function librarySplit(dir: string) {
  const json = JSON.parse(readFileSync(`${dir}/tokenizer.json`, 'utf8')) as Json;
  const stages = (json.pre_tokenizer as Json).pretokenizers as Json[];
  const split = new library.SplitPreTokenizer(stages[0]!);
  assert.ok(split.pattern);
  return { pattern: split.pattern, pieces: (text: string) => split.pre_tokenize_text(text) };
}

function scannedPieces(scan: PieceScanner, text: string): string[] {
  const pieces: string[] = [];
  for (let at = 0; at < text.length; ) {
    const end = scan(text, at);
    assert.ok(end > at && end <= text.length, `scan(${JSON.stringify(text)}, ${at}) = ${end}`);
    pieces.push(text.slice(at, end));
    at = end;
  }
  return pieces;
}

const llama3 = librarySplit(LLAMA3_DIR);
const qwen = librarySplit(QWEN3_DIR);
const cl100kRe = new RegExp(CL100K_TOKEN_SPLIT_REGEX.source, CL100K_TOKEN_SPLIT_REGEX.flags);
const cases = [
  {
    name: 'llama3',
    pattern: llama3.pattern,
    reference: llama3.pieces,
  },
  {
    name: 'qwen',
    pattern: qwen.pattern,
    reference: qwen.pieces,
  },
  {
    name: 'cl100k',
    pattern: cl100kRe,
    reference: (text: string) => Array.from(text.matchAll(cl100kRe), (m) => m[0]),
  },
] as const;

/** Code points and strings that sit on the patterns' edges. */
const EDGES = [
  "'s",
  "'S",
  "'t",
  "'re",
  "'RE",
  "'rE",
  "'ve",
  "'m",
  "'ll",
  "'LL",
  "'d",
  "'",
  "''",
  "'x",
  "'r",
  "'l",
  'ſ',
  'K',
  ' ',
  '  ',
  '   ',
  '\t',
  '\n',
  '\r',
  '\r\n',
  '\n\n',
  ' \n ',
  '\v',
  '\f',
  '\u0085',
  '\u00a0',
  '\u1680',
  '\u2000',
  '\u200a',
  '\u200b',
  '\u2028',
  '\u2029',
  '\u202f',
  '\u205f',
  '\u3000',
  '\ufeff',
  '\u180e',
  '0',
  '12',
  '123',
  '4567',
  '٣',
  '²',
  'Ⅻ',
  '１２',
  '\u{1d7ce}',
  '\u{1d7cf}\u{1d7d0}',
  '\u{10107}',
  'a',
  'Z',
  'é',
  'e\u0301',
  'ß',
  'Привет',
  'مرحبا',
  'नमस्ते',
  '中文字',
  'かな',
  '한국어',
  'ǅ',
  'ʰ',
  '\u{1d400}',
  '\u{20000}',
  '\u{10400}',
  '😀',
  '👍🏽',
  '👨‍👩‍👧',
  '🇫🇷',
  '\ud800',
  '\udbff',
  '\udc00',
  '\udfff',
  '\udc00\ud800',
  '!',
  '?!',
  '...',
  '—',
  '«»',
  '$',
  '_',
  '-',
  '/',
  '\u0000',
  '\u007f',
  '\u00ad',
  '\u0300',
  '\ue000',
  '\uffff',
  '\u{10ffff}',
];

const fragment = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...EDGES) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 6 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 6 }) },
  { weight: 2, arbitrary: fc.stringMatching(/^[a-zA-Z' \n0-9.,]{1,8}$/) },
  {
    weight: 1,
    arbitrary: fc.string({ unit: fc.constantFrom(' ', '\t', '\n', '\r'), maxLength: 6 }),
  },
);
const text = fc.array(fragment, { maxLength: 24 }).map((parts) => parts.join(''));

describe('split scanners', () => {
  test('the fixture models and gpt-tokenizer use the three shipped patterns', () => {
    assert.equal(splitPatternOf(llama3.pattern), 'llama3');
    assert.equal(splitPatternOf(qwen.pattern), 'qwen');
    assert.equal(splitPatternOf(cl100kRe), 'cl100k');
    assert.equal(llama3.pattern.source, SPLIT_PATTERNS.llama3);
  });

  test('any other pattern, or other flags, gets no scanner (the regex runs)', () => {
    assert.equal(scannerFor(/\s+|\S+/gu), null);
    assert.equal(scannerFor(new RegExp(SPLIT_PATTERNS.llama3, 'giu')), null);
    assert.equal(scannerFor(new RegExp(SPLIT_PATTERNS.cl100k, 'gmu')), null);
    assert.notEqual(scannerFor(new RegExp(SPLIT_PATTERNS.qwen, 'u')), null);
  });

  for (const c of cases) {
    const scan = scannerFor(c.pattern)!;

    test(`${c.name}: fixed cases equal the regex`, () => {
      const fixed = [
        '',
        "Hello world! It's 2024, isn't it? I'M here, you'LL see.",
        '  leading and trailing  ',
        'line one\nline two\r\n\r\n  indented\n\n\n',
        'tabs\tand\t\tspaces   x',
        'numbers 1 12 123 1234 12345 3.14159 1,000,000',
        'mixed 中文 English 日本語 한국어 русский العربية हिन्दी',
        'emoji 😀👍🏽 👨‍👩‍👧 🇫🇷 and ✓ ✗',
        'lone \ud800 high, lone \udc00 low, pair \ud83d\ude00',
        "''quoted'' '' 's 'x",
        'code: fn(x) => { return x*2; } // done\n',
        '\u00a0nbsp \u3000ideographic \u2028line \u0085nel \ufeffbom',
        ...EDGES,
        EDGES.join(''),
        EDGES.join(' '),
        EDGES.join('\n'),
      ];
      for (const t of fixed) {
        assert.deepEqual(scannedPieces(scan, t), c.reference(t), JSON.stringify(t));
      }
    });

    test(`${c.name}: equal to the regex on ${RANDOM_STRINGS} random strings`, () => {
      fc.assert(
        fc.property(text, (t) => {
          assert.deepEqual(scannedPieces(scan, t), c.reference(t));
        }),
        { numRuns: RANDOM_STRINGS, seed: 31 },
      );
    });
  }
});
