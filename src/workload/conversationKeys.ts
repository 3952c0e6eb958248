/**
 * A multi-turn conversation as one token stream: turn k's prompt is the stream's first
 * `promptLength` tokens, so its block keys extend the previous turn's instead of being hashed
 * again. Keys depend only on tokens: an entry dropped from the bounded cache is recomputed.
 */
import type { BlockKey } from '../kv/blockKey.ts';
import type { Arrival } from './arrival.ts';
import { fillTokens, KeyExtender, type Materialized } from './tokens.ts';

/** Conversations remembered at most; they end within minutes, old ones go in id order. */
const MAX_CONVERSATIONS = 4096;

export class ConversationKeys {
  readonly #extender: KeyExtender;
  readonly #known = new Map<number, { tokens: number; keys: BlockKey[] }>();

  constructor(blockSize: number) {
    this.#extender = new KeyExtender(blockSize);
  }

  /** The arrival's tokens (its conversation's, by `customer` and `seed`) and their block keys. */
  materialize(a: Arrival): Materialized {
    const tokens = new Int32Array(a.promptLength);
    fillTokens(tokens, 0, a.promptLength, a.seed);
    const known = this.#known.get(a.customer);
    let blockKeys: BlockKey[];
    if (known !== undefined && known.tokens <= a.promptLength) {
      const fromBlock = Math.floor(known.tokens / this.#extender.blockSize);
      blockKeys = known.keys.slice(0, fromBlock);
      this.#extender.extend(tokens, fromBlock, blockKeys.at(-1) ?? null, blockKeys);
    } else {
      blockKeys = this.#extender.extend(tokens, 0, null, []);
    }
    this.#known.set(a.customer, { tokens: a.promptLength, keys: blockKeys });
    if (this.#known.size > MAX_CONVERSATIONS) {
      const oldest = this.#known.keys().next().value;
      if (oldest !== undefined) this.#known.delete(oldest);
    }
    return { tokens, blockKeys };
  }
}
