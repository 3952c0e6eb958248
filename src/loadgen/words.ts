/**
 * Prompt text whose token count is known without asking the server. The vocabulary is every
 * token of the builtin tokenizer that decodes to a space and lowercase letters (` cache`).
 * The tokenizer's pre-split cuts text before each ` word`, so a run of such words encodes to
 * exactly one token per word, and a prefix's tokens never change when more words follow it:
 * equal prefixes tokenize to equal token ids, as the block keys of the prefix cache need.
 */
import { getTokenizer, type Tokenizer } from '../tokenizer/tokenizer.ts';

export class WordVocab {
  readonly #words: readonly string[];

  constructor(words: readonly string[]) {
    if (words.length === 0) throw new Error('WordVocab: no single-token words');
    this.#words = words;
  }

  get size(): number {
    return this.#words.length;
  }

  /** The word standing for synthetic token id `id` (ids wrap around the vocabulary). */
  word(id: number): string {
    return this.#words[id % this.#words.length]!;
  }

  /** Text of one word per synthetic token id: `ids.length` tokens for the builtin tokenizer. */
  text(ids: ArrayLike<number>): string {
    const parts = new Array<string>(ids.length);
    for (let i = 0; i < ids.length; i++) parts[i] = this.word(ids[i]!);
    return parts.join('');
  }
}

/** ` word` tokens of `tokenizer`, in id order, checked to encode back one token each. */
export function singleTokenWords(tokenizer: Tokenizer): string[] {
  const candidates: string[] = [];
  for (let id = 0; id < tokenizer.vocabSize; id++) {
    let text: string;
    try {
      text = tokenizer.decode([id]);
    } catch {
      continue; // special or partial-byte ids
    }
    if (/^ [a-z]{2,}$/.test(text)) candidates.push(text);
  }
  // One encode of the whole list proves the run property for every neighbour at once.
  const ids = tokenizer.encode(candidates.join(''));
  if (ids.length !== candidates.length) {
    return candidates.filter((w) => tokenizer.encode(w + w).length === 2);
  }
  return candidates;
}

let shared: WordVocab | undefined;

/** The vocabulary for the builtin tokenizer (built once, ~50 ms). */
export function builtinVocab(): WordVocab {
  shared ??= new WordVocab(singleTokenWords(getTokenizer()));
  return shared;
}
