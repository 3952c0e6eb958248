/**
 * Deterministic output text. The simulated engine computes no logits; what it "generates" is a
 * stream of common English words, each exactly one token, drawn from a PRNG seeded by the server
 * seed, the request's own seed and a hash of the prompt's token ids. The same prompt on the same
 * seed always streams the same text, and every token decodes on its own (no split characters).
 */
import type { Tokenizer } from '../../tokenizer/tokenizer.ts';
import { Rng } from '../../util/rng.ts';

const WORDS = (
  'the of and to in is that for it as was with be by on not he this are or his from at which ' +
  'but have an they you were her she there been one all we their has would when if will two ' +
  'more no out so said what up its about into than them can only other new some could time ' +
  'these may then do first any now such like our over man me even most made after also did ' +
  'many before must through back years where much your way well down should because each just ' +
  'those people how too little state good very make world still own see men work long get here ' +
  'between both life being under never day same another know while last might us great old ' +
  'year off come since against go came right used take three cache block token prefix route'
).split(' ');

interface Vocab {
  ids: number[];
  texts: string[];
  /** The texts as JSON string literals, so a stream chunk is built by concatenation. */
  textsJson: string[];
}

/** Single-token words of this tokenizer, leading space included, with their text. */
function wordTokens(tokenizer: Tokenizer): Vocab {
  const vocab: Vocab = { ids: [], texts: [], textsJson: [] };
  for (const word of new Set(WORDS)) {
    const enc = tokenizer.encode(` ${word}`);
    if (enc.length !== 1) continue;
    vocab.ids.push(enc[0]!);
    vocab.texts.push(` ${word}`);
    vocab.textsJson.push(JSON.stringify(` ${word}`));
  }
  return vocab;
}

const cache = new WeakMap<Tokenizer, Vocab>();

function hashTokens(tokens: readonly number[], seed: number): number {
  let h = seed ^ 0x811c9dc5;
  for (const t of tokens) h = Math.imul(h ^ t, 0x01000193);
  return h >>> 0;
}

/** The output token ids of one request, drawn lazily. */
export class OutputText {
  readonly #rng: Rng;
  readonly #vocab: Vocab;

  constructor(
    tokenizer: Tokenizer,
    serverSeed: number,
    promptTokens: readonly number[],
    requestSeed: number | null,
  ) {
    let vocab = cache.get(tokenizer);
    if (!vocab) {
      vocab = wordTokens(tokenizer);
      cache.set(tokenizer, vocab);
    }
    this.#vocab = vocab;
    const seed = hashTokens(
      promptTokens,
      (serverSeed ^ Math.imul(requestSeed ?? 0, 0x9e3779b1)) >>> 0,
    );
    this.#rng = new Rng(seed);
  }

  /** The next token id, its text, and that text as a JSON string literal. */
  next(): { tokenId: number; text: string; textJson: string } {
    const i = this.#rng.int(this.#vocab.ids.length);
    return {
      tokenId: this.#vocab.ids[i]!,
      text: this.#vocab.texts[i]!,
      textJson: this.#vocab.textsJson[i]!,
    };
  }
}
