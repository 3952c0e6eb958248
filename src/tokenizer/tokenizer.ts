/**
 * What a tokenizer is to kvroute, and the builtin one that `npm start`, the simulator and the
 * engine use when no `--tokenizer` is given.
 *
 * The builtin is OpenAI's cl100k_base (the `gpt-tokenizer` package's vocabulary and split
 * pattern: pure TypeScript, no download). Llama 3's tokenizer is tiktoken-based and starts from
 * these same 100k merges, so English prompt lengths come out close to what a real Llama 3 engine
 * counts. It encodes through kvroute's fast BPE path (`pieceEncoder.ts`, `bpeMerge.ts`) with
 * tiktoken's merge rule, which gives gpt-tokenizer's ids (tested) without its quadratic merge
 * loop: gpt-tokenizer takes 40 s on a 200,000-letter word, this path a fraction of a second, and
 * in slices. Text that contains a special-token string (`<|endoftext|>`) is encoded as ordinary
 * text: a prompt is data, never control.
 */
import bpeRanks from 'gpt-tokenizer/bpeRanks/cl100k_base';
import { decode, vocabularySize } from 'gpt-tokenizer/encoding/cl100k_base';
import { CL100K_TOKEN_SPLIT_REGEX } from 'gpt-tokenizer/encodingParams/constants';
import { BYTE_CHARS, toByteChars, utf8Bytes } from './byteLevel.ts';
import { type BpeVocab, WordsJob } from './bpeWords.ts';
import { type Pairs, PairTable } from './pairTable.ts';
import { type Job, PieceEncoder, regexSplitter } from './pieceEncoder.ts';

export type { Job } from './pieceEncoder.ts';

/** The least a tokenizer offers: text to ids and back. */
export interface Tokenizer {
  /** Stable name, reported by /tokenize and in logs. */
  readonly name: string;
  readonly vocabSize: number;
  encode(text: string): number[];
  decode(ids: readonly number[]): string;
}

/** A model's tokenizer as the servers use it. */
export interface TextTokenizer extends Tokenizer {
  /** Ids of `text`; `addSpecialTokens`: the model's own additions (a BOS) around it. */
  encode(text: string, addSpecialTokens?: boolean): number[];
  /**
   * The same ids appended to `out` by a resumable job (see `Job`), which stops early once `out`
   * holds more than `limitTokens` ids.
   */
  encodeJob(text: string, addSpecialTokens: boolean, out: number[], limitTokens: number): Job;
  decode(ids: readonly number[], skipSpecialTokens?: boolean): string;
  /** Each id's vocabulary string (vLLM's `token_strs`). */
  tokenStrings(ids: readonly number[]): string[];
  /**
   * At most this many UTF-16 code units of input per token (so a text of n code units has at
   * least n / this many tokens), or null when no such bound is known.
   */
  readonly maxCharsPerToken: number | null;
}

class Cl100kTokenizer implements TextTokenizer {
  readonly name = 'cl100k_base';
  readonly vocabSize = vocabularySize;
  readonly maxCharsPerToken: number;
  readonly #pieces: PieceEncoder;
  /** Each rank's bytes as byte-level characters (its vocabulary string, as HF spells it). */
  readonly #strings: string[];

  constructor() {
    const { vocab, longest } = byteLevelVocab(bpeRanks);
    this.maxCharsPerToken = longest;
    this.#strings = [];
    for (const [token, rank] of vocab) this.#strings[rank] = token;
    const bpe: BpeVocab = {
      pairs: tiktokenPairs(vocab, this.#strings),
      ids: vocab,
      // tiktoken looks a whole piece up before merging.
      wholeWords: true,
      maxTokenChars: longest,
      byteIds: Int32Array.from(BYTE_CHARS, (c) => vocab.get(c)!),
      finish(symbols, out) {
        for (let i = 0; i < symbols.length; i++) out.push(symbols[i]!);
      },
    };
    const words = (piece: string) => [{ bytes: utf8Bytes(piece) }];
    this.#pieces = new PieceEncoder(
      {
        encodePiece(piece, _first, out) {
          const job = new WordsJob(bpe, words(piece));
          job.run(Number.POSITIVE_INFINITY);
          job.finish(out);
        },
        longPiece: (piece) => new WordsJob(bpe, words(piece)),
      },
      // gpt-tokenizer keeps the pattern's matches only (it matches every character).
      regexSplitter(
        new RegExp(CL100K_TOKEN_SPLIT_REGEX.source, CL100K_TOKEN_SPLIT_REGEX.flags),
        false,
      ),
    );
  }

  encode(text: string): number[] {
    const out: number[] = [];
    this.#pieces.encodeSection(text, true, out);
    return out;
  }

  /** cl100k has no BOS: `addSpecialTokens` changes nothing. */
  encodeJob(text: string, _addSpecialTokens: boolean, out: number[], limitTokens: number): Job {
    return this.#pieces.sectionJob(text, true, out, limitTokens);
  }

  decode(ids: readonly number[]): string {
    return decode(ids);
  }

  /** Byte-level strings (`Ġworld`), as vLLM's `convert_ids_to_tokens` gives for such a model. */
  tokenStrings(ids: readonly number[]): string[] {
    return ids.map((id) => this.#strings[id] ?? '');
  }
}

/** Every rank's bytes as byte-level characters, and the longest. */
function byteLevelVocab(ranks: readonly (string | number[])[]): {
  vocab: Map<string, number>;
  longest: number;
} {
  const vocab = new Map<string, number>();
  let longest = 0;
  ranks.forEach((token, rank) => {
    const chars =
      typeof token === 'string' ? stringByteChars(token) : toByteChars(Uint8Array.from(token));
    vocab.set(chars, rank);
    longest = Math.max(longest, chars.length);
  });
  return { vocab, longest };
}

/** Pairs remembered before the memo starts over. */
const PAIR_MEMO_MAX = 1 << 20;

/**
 * tiktoken's merge rule: two adjacent parts merge when their concatenation is a token, at that
 * token's rank (which is also its id). Asked on demand and remembered, rather than tabulated up
 * front: a table of every split of every token takes a third of a second to build, and only word
 * cache misses ask.
 */
function tiktokenPairs(vocab: Map<string, number>, strings: readonly string[]): Pairs {
  let memo = new PairTable(1024);
  const rank = (left: number, right: number): number => {
    if (left < 0 || right < 0) return -1;
    if (memo.has(left, right)) return memo.rank(left, right);
    const r = vocab.get(strings[left]! + strings[right]!) ?? -1;
    if (memo.size >= PAIR_MEMO_MAX) memo = new PairTable(1024);
    memo.set(left, right, r, r);
    return r;
  };
  return { rank, merged: rank };
}

/** `toByteChars(utf8Bytes(s))`, without the encoder for ASCII (most of the vocabulary). */
function stringByteChars(s: string): string {
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x80) return toByteChars(utf8Bytes(s));
    out += BYTE_CHARS[c];
  }
  return out;
}

let shared: Cl100kTokenizer | undefined;

/** The process-wide builtin tokenizer (built once: its tables are large). */
export function getTokenizer(): TextTokenizer {
  shared ??= new Cl100kTokenizer();
  return shared;
}
