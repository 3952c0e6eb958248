/**
 * Synthetic token ids and their block keys. A token stream is a pure function of a 32-bit
 * stream seed and a position, so equal seeds give equal tokens (and therefore equal block keys)
 * without storing anything. Keys of a shared prefix are computed once and extended per request
 * from the prefix's last full block (`extendBlockKeys`: the engine's own chaining).
 */
import { type BlockKey, extendBlockKeys, type KeyScope } from '../kv/blockKey.ts';

/** A prompt's token ids and the keys of its full blocks. */
export interface Materialized {
  /** Int32Array: the engine keeps it as given, with no copy and off the JS heap. */
  tokens: Int32Array;
  blockKeys: BlockKey[];
}

/** Token ids are 17-bit (a power of two near Llama 3's 128K vocabulary: a shift, no modulo). */
export const VOCAB_BITS = 17;

function fmix32(h: number): number {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** Mixes two 32-bit values into a seed (for per-customer, per-hash-id streams). */
export function mixSeed(a: number, b: number): number {
  return fmix32(Math.imul(a ^ 0x9e3779b9, 0x01000193) ^ fmix32(b + 0x7f4a7c15));
}

/**
 * Writes `count` tokens of stream `streamSeed` (from its start) into `out[at..]`. The stream is
 * an LCG seeded through a mixer: a multiply-add per token, and its top bits are well spread.
 */
export function fillTokens(
  out: Int32Array | number[],
  at: number,
  count: number,
  streamSeed: number,
): void {
  let state = fmix32(streamSeed ^ 0x2545f491) | 0;
  for (let i = 0; i < count; i++) {
    state = (Math.imul(state, 1664525) + 1013904223) | 0;
    out[at + i] = state >>> (32 - VOCAB_BITS);
  }
}

/** Extends block keys over a prompt from a known prefix's last key (see extendBlockKeys). */
export class KeyExtender {
  readonly #blockSize: number;
  readonly #scope: KeyScope | undefined;

  constructor(blockSize: number, scope?: KeyScope) {
    this.#blockSize = blockSize;
    this.#scope = scope;
  }

  get blockSize(): number {
    return this.#blockSize;
  }

  /** Appends the keys of full blocks `fromBlock..` of `tokens` to `out`; returns `out`. */
  extend(
    tokens: ArrayLike<number>,
    fromBlock: number,
    parent: BlockKey | null,
    out: BlockKey[],
    limitBlocks = Number.POSITIVE_INFINITY,
  ): BlockKey[] {
    return extendBlockKeys(
      tokens,
      this.#blockSize,
      fromBlock,
      parent,
      out,
      this.#scope,
      limitBlocks,
    );
  }
}

/** A shared prefix: its tokens and the keys of its full blocks, built once. */
export interface Prefix {
  tokens: Int32Array;
  keys: BlockKey[];
}

/**
 * One shared prefix per customer, built on first use and kept (a workload has a bounded set), and
 * prompts made of a customer's prefix then the request's own tokens. A prompt's keys reuse the
 * prefix's and extend from its last full block.
 */
export class CustomerPrefixes {
  readonly #prefixes = new Map<number, Prefix>();
  readonly #extender: KeyExtender;
  readonly #seed: number;
  readonly #customers: number;
  readonly #prefixTokens: number;
  readonly #scopeOf: ((customer: number) => KeyScope | undefined) | undefined;

  /**
   * `workload`: the workload's seed and block size; `salt`: the workload's own, mixed into its
   * seed, so that workloads of one seed draw different prefixes; `customers` prefixes of
   * `prefixTokens` tokens each. `scopeOf`: a customer's key scope (its LoRA adapter), folded into
   * its chain's first block.
   */
  constructor(
    workload: { seed: number; blockSize: number },
    salt: number,
    customers: number,
    prefixTokens: number,
    scopeOf?: (customer: number) => KeyScope | undefined,
  ) {
    this.#seed = mixSeed(workload.seed, salt);
    this.#extender = new KeyExtender(workload.blockSize);
    this.#customers = customers;
    this.#prefixTokens = prefixTokens;
    this.#scopeOf = scopeOf;
  }

  get(customer: number): Prefix {
    let p = this.#prefixes.get(customer);
    if (p === undefined) {
      const length = this.#prefixTokens;
      const tokens = new Int32Array(length);
      fillTokens(tokens, 0, length, mixSeed(this.#seed, customer));
      const scope = this.#scopeOf?.(customer);
      const keys = scope
        ? extendBlockKeys(tokens, this.#extender.blockSize, 0, null, [], scope)
        : this.#extender.extend(tokens, 0, null, []);
      p = { tokens, keys };
      this.#prefixes.set(customer, p);
    }
    return p;
  }

  /** The customer's prefix, then `ownTokens` tokens of stream `streamSeed`. */
  prompt(customer: number, ownTokens: number, streamSeed: number): Materialized {
    const prefix = this.get(customer);
    const tokens = new Int32Array(prefix.tokens.length + ownTokens);
    tokens.set(prefix.tokens);
    fillTokens(tokens, prefix.tokens.length, ownTokens, streamSeed);
    const fullPrefixBlocks = prefix.keys.length;
    const blockKeys = prefix.keys.slice();
    const parent = fullPrefixBlocks > 0 ? prefix.keys[fullPrefixBlocks - 1]! : null;
    if (parent === null && this.#scopeOf) {
      // No full prefix block: the prompt's own first block carries the scope.
      const scope = this.#scopeOf(customer);
      extendBlockKeys(tokens, this.#extender.blockSize, 0, null, blockKeys, scope);
    } else this.#extender.extend(tokens, fullPrefixBlocks, parent, blockKeys);
    return { tokens, blockKeys };
  }

  /** Key of the last full block of the customer's prefix: holding it = owning the prefix. */
  watchKey(customer: number): BlockKey | null {
    if (customer < 0 || customer >= this.#customers) return null;
    return this.get(customer).keys.at(-1) ?? null;
  }
}
