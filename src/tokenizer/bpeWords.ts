/**
 * The BPE model's half of the fast path: the ids of one word (a piece after pre-tokenization),
 * from its symbols (bytes of a byte-level model, characters otherwise), a whole-word lookup first
 * when the model asks for it (`ignore_merges`, tiktoken), then the merge loop, then the model's
 * handling of symbols outside the vocabulary (byte fallback, the unknown token).
 */
import { LongMerge, mergeShort, SHORT_WORD_SYMBOLS } from './bpeMerge.ts';
import { BYTE_CHARS } from './byteLevel.ts';
import type { Pairs } from './pairTable.ts';
import type { PieceJob } from './pieceEncoder.ts';

export interface BpeVocab {
  pairs: Pairs;
  /** Vocabulary string -> symbol id. */
  ids: ReadonlyMap<string, number>;
  /** Look the whole word up before merging. */
  wholeWords: boolean;
  /** The longest vocabulary string (a longer word cannot be one token). */
  maxTokenChars: number;
  /** Byte value -> symbol id, for byte-level models (all 256 present). */
  byteIds: Int32Array | null;
  /** Appends the output ids of merged symbols (negative: a character outside the vocabulary). */
  finish(symbols: ArrayLike<number>, out: number[]): void;
}

/** A word as the model sees it: vocabulary-space text, or raw bytes of a byte-level model. */
export type Word = { text: string } | { bytes: Uint8Array };

/** The ids of several words, merged in turn; long words merge across run() calls. */
export class WordsJob implements PieceJob {
  readonly #vocab: BpeVocab;
  readonly #words: readonly Word[];
  readonly #ids: number[] = [];
  #next = 0;
  #long: LongMerge | null = null;

  constructor(vocab: BpeVocab, words: readonly Word[]) {
    this.#vocab = vocab;
    this.#words = words;
  }

  run(deadlineMs: number): boolean {
    const v = this.#vocab;
    for (;;) {
      if (this.#long) {
        if (!this.#long.run(deadlineMs)) return false;
        v.finish(this.#long.symbols(), this.#ids);
        this.#long = null;
      }
      if (this.#next === this.#words.length) return true;
      const word = this.#words[this.#next++]!;
      if (v.wholeWords) {
        if ('text' in word) {
          const id = word.text.length <= v.maxTokenChars ? v.ids.get(word.text) : undefined;
          if (id !== undefined) {
            v.finish([id], this.#ids);
            continue;
          }
        } else if (word.bytes.length <= v.maxTokenChars) {
          // Byte-level: the word's characters are its bytes.
          let chars = '';
          for (let i = 0; i < word.bytes.length; i++) chars += BYTE_CHARS[word.bytes[i]!];
          const id = v.ids.get(chars);
          if (id !== undefined) {
            v.finish([id], this.#ids);
            continue;
          }
        }
      }
      const symbols = symbolsOf(v, word);
      if (symbols.length <= SHORT_WORD_SYMBOLS) {
        v.finish(mergeShort(v.pairs, Array.from(symbols)), this.#ids);
      } else this.#long = new LongMerge(v.pairs, symbols);
    }
  }

  finish(out: number[]): void {
    for (let i = 0; i < this.#ids.length; i++) out.push(this.#ids[i]!);
  }
}

/** Initial symbols: byte ids, or characters by vocabulary id (unknown: -(code point + 1)). */
function symbolsOf(v: BpeVocab, word: Word): Int32Array {
  if ('bytes' in word) {
    const byteIds = v.byteIds!;
    const out = new Int32Array(word.bytes.length);
    for (let i = 0; i < word.bytes.length; i++) out[i] = byteIds[word.bytes[i]!]!;
    return out;
  }
  const out: number[] = [];
  for (const ch of word.text) out.push(v.ids.get(ch) ?? -(ch.codePointAt(0)! + 1));
  return Int32Array.from(out);
}
