/**
 * inference-perf's `shared_prefix` data shape (`type: shared_prefix` with `shared_prefix:
 * {num_groups, num_prompts_per_group, system_prompt_len, question_len, output_len}`, its
 * SharedPrefixDataGenerator): num_groups system prompts of system_prompt_len tokens, each with
 * num_prompts_per_group questions of question_len tokens, every request asking for output_len
 * tokens. As upstream, the num_groups x num_prompts_per_group prompts are generated once,
 * shuffled once, then sent in that order over and over (so a prompt's second send is a full
 * repeat, its first a system-prompt hit at best). Arrivals are Poisson at the rate given
 * (inference-perf's `load.type: poisson`). Defaults are upstream's: 10, 10, 100, 50, 50.
 */
import type { BlockKey } from '../kv/blockKey.ts';
import { Rng } from '../util/rng.ts';
import type { Arrival } from './arrival.ts';
import { CustomerPrefixes, type Materialized, mixSeed } from './tokens.ts';
import type { Workload, WorkloadOptions } from './types.ts';
import type { SharedPrefixShape } from './types.ts';

/** inference-perf's defaults (its `SharedPrefix` config model). */
export const SHARED_PREFIX_DEFAULTS: SharedPrefixShape = {
  numGroups: 10,
  numPromptsPerGroup: 10,
  systemPromptLen: 100,
  questionLen: 50,
  outputLen: 50,
};

const DEFAULT_RATE_PER_S = 10;

export class SharedPrefixGroupsWorkload implements Workload {
  readonly name = 'shared-prefix';
  readonly blockSize: number;
  readonly customers: number;
  readonly watchedCustomer = 0;
  readonly #opts: WorkloadOptions;
  readonly #shape: SharedPrefixShape;
  readonly #ratePerS: number;
  readonly #systemPrompts: CustomerPrefixes;

  constructor(opts: WorkloadOptions, shape: SharedPrefixShape = SHARED_PREFIX_DEFAULTS) {
    this.blockSize = opts.blockSize;
    this.#opts = opts;
    this.#shape = shape;
    this.customers = shape.numGroups;
    this.#ratePerS = opts.ratePerS ?? DEFAULT_RATE_PER_S;
    this.#systemPrompts = new CustomerPrefixes(opts, 0x5e1, shape.numGroups, shape.systemPromptLen);
  }

  *arrivals(): Iterator<Arrival> {
    const s = this.#shape;
    const gaps = Rng.derive(this.#opts.seed, 'shared-prefix:arrivals');
    const shuffle = Rng.derive(this.#opts.seed, 'shared-prefix:order');
    const prompts = s.numGroups * s.numPromptsPerGroup;
    // Generated group by group, shuffled once, then cycled (upstream's get_data).
    const order = Array.from({ length: prompts }, (_, i) => i);
    for (let i = prompts - 1; i > 0; i--) {
      const j = shuffle.int(i + 1);
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    const meanGapMs = 1000 / this.#ratePerS;
    let atMs = gaps.exponential(meanGapMs);
    for (let k = 0; atMs < this.#opts.durationMs; k++) {
      const prompt = order[k % prompts]!;
      yield {
        atMs,
        customer: Math.floor(prompt / s.numPromptsPerGroup),
        promptLength: s.systemPromptLen + s.questionLen,
        outputTokens: s.outputLen,
        // The prompt's own question: the same tokens every time it is sent.
        seed: prompt,
      };
      atMs += gaps.exponential(meanGapMs);
    }
  }

  materialize(a: Arrival): Materialized {
    return this.#systemPrompts.prompt(
      a.customer,
      this.#shape.questionLen,
      mixSeed(this.#opts.seed, a.seed),
    );
  }

  prefixWatchKey(customer: number): BlockKey | null {
    return this.#systemPrompts.watchKey(customer);
  }
}
