/**
 * Deterministic output text from a simulated language model. The engine computes no logits; its
 * "model" is a bigram distribution over common English words that are one token each in the
 * tokenizer (leading space included, so every token decodes on its own):
 *
 *   after token t, the word at rank r has probability (r + 1)^-s / H  (Zipf, s = ZIPF_S),
 *   and the word at rank r is word (r + offset(t)) mod V, offset(t) a hash of t and the seed.
 *
 * Sampling honours vLLM's knobs on that distribution (temperature, top_k, top_p, min_p; a
 * temperature of 0 is greedy), and reported log-probabilities are the raw ones, before those
 * knobs, as vLLM reports by default (`logprobs_mode="raw_logprobs"`). Draws come from a PRNG
 * seeded by the server seed, the request's seed, the choice's index and a hash of the prompt:
 * the same prompt on the same seeds always streams the same text.
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

/** Zipf exponent of the simulated distribution. */
const ZIPF_S = 1.1;
/** Below this temperature sampling is greedy (vLLM's _SAMPLING_EPS). */
const GREEDY_TEMPERATURE = 1e-5;

/** The simulated model of one tokenizer: its word tokens and the rank distribution. */
export class SimulatedModel {
  readonly ids: number[] = [];
  readonly texts: string[] = [];
  /** The texts as JSON string literals, so a stream chunk is built by concatenation. */
  readonly textsJson: string[] = [];
  /** Raw log-probability of each rank, highest first. */
  readonly rankLogprobs: Float64Array;
  /** Below every word's: what a token outside the simulated vocabulary gets. */
  readonly floorLogprob: number;
  readonly #wordOf = new Map<number, number>();

  constructor(readonly tokenizer: Tokenizer) {
    for (const word of new Set(WORDS)) {
      const enc = tokenizer.encode(` ${word}`);
      if (enc.length !== 1 || this.#wordOf.has(enc[0]!)) continue;
      this.#wordOf.set(enc[0]!, this.ids.length);
      this.ids.push(enc[0]!);
      this.texts.push(` ${word}`);
      this.textsJson.push(JSON.stringify(` ${word}`));
    }
    const weights = this.ids.map((_, r) => (r + 1) ** -ZIPF_S);
    const total = weights.reduce((a, b) => a + b, 0);
    this.rankLogprobs = Float64Array.from(weights, (w) => Math.log(w / total));
    this.floorLogprob = this.rankLogprobs.at(-1)! - 1;
  }

  get size(): number {
    return this.ids.length;
  }

  /** Word index of a token id, or -1 when the token is not one of the model's words. */
  wordOf(tokenId: number): number {
    return this.#wordOf.get(tokenId) ?? -1;
  }

  /** The rotation of the distribution after `prevToken` (a hash of it and the seed). */
  offsetAfter(prevToken: number, seed: number): number {
    let h = Math.imul(prevToken ^ 0x9e3779b9, 0x85ebca6b) ^ seed;
    h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
    return ((h ^ (h >>> 16)) >>> 0) % this.size;
  }

  wordAt(offset: number, rank: number): number {
    return (rank + offset) % this.size;
  }

  rankOf(offset: number, word: number): number {
    return (word - offset + this.size) % this.size;
  }

  /**
   * Raw log-probability of `tokenId` after `prevToken`: a word's by its rank; any other token a
   * deterministic value below every word's.
   */
  logprobOf(prevToken: number, tokenId: number, seed: number): number {
    const word = this.wordOf(tokenId);
    if (word >= 0) return this.rankLogprobs[this.rankOf(this.offsetAfter(prevToken, seed), word)]!;
    return this.floorLogprob - ((Math.imul(tokenId, 0x9e3779b1) >>> 0) % 1000) / 250;
  }
}

const models = new WeakMap<Tokenizer, SimulatedModel>();

/** The simulated model of a tokenizer (built once: the tokenizer's first encodes are slow). */
export function simulatedModel(tokenizer: Tokenizer): SimulatedModel {
  let model = models.get(tokenizer);
  if (!model) {
    model = new SimulatedModel(tokenizer);
    models.set(tokenizer, model);
  }
  return model;
}

/** vLLM's sampling knobs; null: off (temperature null: 1.0). */
export interface SamplingKnobs {
  temperature: number | null;
  topK: number | null;
  topP: number | null;
  minP: number | null;
}

/** One drawn token, with where it stood in the distribution it was drawn from. */
export interface DrawnToken {
  tokenId: number;
  text: string;
  textJson: string;
  /** Rank of the chosen word and the rotation of that step's distribution. */
  rank: number;
  offset: number;
}

function hashTokens(tokens: readonly number[], seed: number): number {
  let h = seed ^ 0x811c9dc5;
  for (const t of tokens) h = Math.imul(h ^ t, 0x01000193);
  return h >>> 0;
}

/**
 * The cumulative sampling weights by rank after temperature, min_p, top_k and top_p; null for
 * greedy. Ranks past the kept ones have weight 0.
 */
function samplingCdf(model: SimulatedModel, knobs: SamplingKnobs): Float64Array | null {
  const temperature = knobs.temperature ?? 1;
  if (temperature < GREEDY_TEMPERATURE) return null;
  const v = model.size;
  const weights = Float64Array.from(model.rankLogprobs, (lp) => Math.exp(lp / temperature));
  let total = weights.reduce((a, b) => a + b, 0);
  let kept = v;
  if (knobs.minP !== null && knobs.minP > 0) {
    const floor = knobs.minP * (weights[0]! / total);
    while (kept > 1 && weights[kept - 1]! / total < floor) kept--;
  }
  if (knobs.topK !== null && knobs.topK > 0) kept = Math.min(kept, knobs.topK);
  total = 0;
  for (let r = 0; r < kept; r++) total += weights[r]!;
  if (knobs.topP !== null && knobs.topP < 1) {
    let mass = 0;
    for (let r = 0; r < kept; r++) {
      mass += weights[r]! / total;
      if (mass >= knobs.topP) {
        kept = r + 1;
        break;
      }
    }
  }
  const cdf = new Float64Array(v);
  let acc = 0;
  for (let r = 0; r < v; r++) {
    if (r < kept) acc += weights[r]!;
    cdf[r] = acc;
  }
  return cdf;
}

/** The output tokens of one choice, drawn lazily. */
export class TokenSampler {
  readonly #model: SimulatedModel;
  readonly #rng: Rng;
  readonly #cdf: Float64Array | null;
  readonly #seed: number;
  #prev: number;

  constructor(
    model: SimulatedModel,
    serverSeed: number,
    promptTokens: readonly number[],
    requestSeed: number | null,
    choice: number,
    knobs: SamplingKnobs,
  ) {
    this.#model = model;
    this.#seed = serverSeed >>> 0;
    // vLLM gives choice i of a seeded request the seed + i; unseeded choices differ by index.
    const mixed =
      requestSeed === null
        ? serverSeed ^ Math.imul(choice, 0x85ebca6b)
        : serverSeed ^ Math.imul(requestSeed + choice, 0x9e3779b1);
    this.#rng = new Rng(hashTokens(promptTokens, mixed >>> 0));
    this.#cdf = samplingCdf(model, knobs);
    this.#prev = promptTokens.length > 0 ? promptTokens[promptTokens.length - 1]! : 0;
  }

  /** The next token; a word whose id is in `banned` is passed over for the next rank. */
  next(banned?: ReadonlySet<number>): DrawnToken {
    const model = this.#model;
    const offset = model.offsetAfter(this.#prev, this.#seed);
    let rank = 0;
    const cdf = this.#cdf;
    if (cdf) {
      const u = this.#rng.next() * cdf[cdf.length - 1]!;
      let lo = 0;
      let hi = cdf.length - 1;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (cdf[mid]! > u) hi = mid;
        else lo = mid + 1;
      }
      rank = lo;
    }
    let word = model.wordAt(offset, rank);
    if (banned && banned.size > 0) {
      for (let tries = 0; tries < model.size && banned.has(model.ids[word]!); tries++) {
        rank = (rank + 1) % model.size;
        word = model.wordAt(offset, rank);
      }
    }
    const tokenId = model.ids[word]!;
    this.#prev = tokenId;
    return { tokenId, text: model.texts[word]!, textJson: model.textsJson[word]!, rank, offset };
  }
}
