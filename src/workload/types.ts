import type { BlockKey } from '../kv/blockKey.ts';
import type { Arrival } from './arrival.ts';
import type { Materialized } from './tokens.ts'; /**
 * A workload: the stream of arrivals a run replays and the prompts it materializes, and the options
 * every workload is made with.
 */
export interface SharedPrefixShape {
  numGroups: number;
  numPromptsPerGroup: number;
  systemPromptLen: number;
  questionLen: number;
  outputLen: number;
}

export interface Workload {
  readonly name: string;
  readonly blockSize: number;
  /** Customers (prefix groups) the workload draws from; 0 when unknown. */
  readonly customers: number;
  /** The customer whose prefix the report follows (the hot one, else customer 0), or null. */
  readonly watchedCustomer: number | null;
  /** LoRA adapters the requests run with (`Arrival.lora`); absent: none, the base model only. */
  readonly adapters?: number;
  /** A fresh stream of arrivals in time order, ending before the workload's duration. */
  arrivals(): Iterator<Arrival>;
  materialize(arrival: Arrival): Materialized;
  /** Key of the last full block of a customer's shared prefix: holding it = owning the prefix. */
  prefixWatchKey(customer: number): BlockKey | null;
}

export interface WorkloadOptions {
  seed: number;
  durationMs: number;
  blockSize: number;
  /** Requests per second; each workload has its own default. */
  ratePerS?: number;
  /** `lora`: adapters the customers are spread over, and the Zipf exponent of their popularity. */
  adapters?: number;
  zipfS?: number;
  /** `shared-prefix`: inference-perf's shape (sharedPrefixGroups.ts); absent: its defaults. */
  sharedPrefix?: SharedPrefixShape;
  /**
   * `groups`: every prompt once, all at time 0 (SGLang's bench_serving with an infinite request
   * rate), in a shuffled order (its default) or group by group (--disable-shuffle).
   */
  burst?: GroupsBurst;
}

export type GroupsBurst = { order: 'shuffled' | 'grouped' };
