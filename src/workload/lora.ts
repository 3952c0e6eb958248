/**
 * `lora`: the router seed's load served by LoRA adapters on shared base replicas. Customers are
 * spread over K adapters (customer c uses adapter c mod K, so each adapter has its own customers
 * and prefixes); a request picks an adapter by a Zipf law (adapter k, 0-based, with weight
 * 1 / (k + 1)^s), then one of that adapter's customers uniformly. Prompts are the seed's (a
 * 6,000-token customer prefix and 2,000 own tokens, 300 out, Poisson at 40 req/s), keyed with
 * the adapter's name, as an engine keys an adapter's blocks. Adapters are named `lora-0` ...
 */
import type { BlockKey } from '../kv/blockKey.ts';
import { Rng } from '../util/rng.ts';
import { CustomerPrefixes, type Materialized } from './tokens.ts';
import { type Arrival, loadArrival } from './arrival.ts';
import type { Workload, WorkloadOptions } from './types.ts';

export const DEFAULT_LORA_ADAPTERS = 16;
export const DEFAULT_LORA_ZIPF = 1;

const LOAD = {
  ratePerS: 40,
  customers: 200,
  sharedTokens: 6000,
  uniqueTokens: 2000,
  outputTokens: 300,
} as const;

export const loraAdapterName = (k: number): string => `lora-${k}`;

/** Cumulative Zipf weights of K ranks with exponent s, normalized to end at 1. */
export function zipfCdf(k: number, s: number): number[] {
  const weights = Array.from({ length: k }, (_, i) => 1 / (i + 1) ** s);
  const total = weights.reduce((a, b) => a + b, 0);
  let acc = 0;
  return weights.map((w) => {
    acc += w / total;
    return acc;
  });
}

export class LoraWorkload implements Workload {
  readonly name = 'lora';
  readonly blockSize: number;
  readonly customers: number = LOAD.customers;
  readonly watchedCustomer = 0;
  readonly adapters: number;
  readonly #opts: WorkloadOptions;
  readonly #ratePerS: number;
  readonly #cdf: number[];
  readonly #prefixes: CustomerPrefixes;

  constructor(opts: WorkloadOptions) {
    const adapters = opts.adapters ?? DEFAULT_LORA_ADAPTERS;
    const zipf = opts.zipfS ?? DEFAULT_LORA_ZIPF;
    if (!Number.isInteger(adapters) || adapters < 1 || adapters > LOAD.customers) {
      throw new RangeError(`adapters must be an integer in 1..${LOAD.customers}, got ${adapters}`);
    }
    if (!(zipf >= 0 && Number.isFinite(zipf))) {
      throw new RangeError(`the Zipf exponent must be a finite number >= 0, got ${zipf}`);
    }
    this.blockSize = opts.blockSize;
    this.adapters = adapters;
    this.#opts = opts;
    this.#ratePerS = opts.ratePerS ?? LOAD.ratePerS;
    this.#cdf = zipfCdf(adapters, zipf);
    this.#prefixes = new CustomerPrefixes(
      opts,
      0x10a,
      LOAD.customers,
      LOAD.sharedTokens,
      (customer) => ({ loraName: this.adapterOf(customer) }),
    );
  }

  /** The adapter a customer's requests run with. */
  adapterOf(customer: number): string {
    return loraAdapterName(customer % this.adapters);
  }

  *arrivals(): Iterator<Arrival> {
    const gaps = Rng.derive(this.#opts.seed, 'lora:arrivals');
    const picks = Rng.derive(this.#opts.seed, 'lora:customers');
    const meanGapMs = 1000 / this.#ratePerS;
    const K = this.adapters;
    let atMs = gaps.exponential(meanGapMs);
    while (atMs < this.#opts.durationMs) {
      const u = picks.next();
      let adapter = 0;
      while (adapter < K - 1 && u >= this.#cdf[adapter]!) adapter++;
      // Customers of adapter k: k, k + K, k + 2K, ... below the customer count.
      const ofAdapter = Math.ceil((LOAD.customers - adapter) / K);
      const customer = adapter + K * picks.int(ofAdapter);
      yield {
        ...loadArrival(atMs, customer, LOAD, picks.nextU32()),
        lora: loraAdapterName(adapter),
      };
      atMs += gaps.exponential(meanGapMs);
    }
  }

  materialize(a: Arrival): Materialized {
    return this.#prefixes.prompt(a.customer, a.promptLength - LOAD.sharedTokens, a.seed);
  }

  prefixWatchKey(customer: number): BlockKey | null {
    return this.#prefixes.watchKey(customer);
  }
}
