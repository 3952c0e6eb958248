/**
 * Synthetic workloads, each a deterministic function of its seed. Arrivals are generated lazily
 * as cheap records (time, customer, lengths, a seed for the request's own tokens); token ids
 * and block keys are materialized only when the request arrives, so memory stays bounded by
 * what is in flight, and every policy replays exactly the same arrivals.
 */
import type { BlockKey } from '../kv/blockKey.ts';
import { Rng } from '../util/rng.ts';
import { type Arrival, loadArrival } from './arrival.ts';
import { ShareGptChatWorkload } from './chat.ts';
import { LoraWorkload } from './lora.ts';
import { SharedPrefixGroupsWorkload } from './sharedPrefixGroups.ts';

import {
  type ConversationTurn,
  ConversationWorkload,
  type TurnDraws,
} from './conversationWorkload.ts';
import { CustomerPrefixes, type Materialized, mixSeed } from './tokens.ts';
import type { Workload, WorkloadOptions } from './types.ts';

export type { Materialized } from './tokens.ts';
export type { Arrival } from './arrival.ts';

export const WORKLOAD_NAMES = [
  'seed',
  'hot',
  'low-shared',
  'groups',
  'multiturn',
  'lora',
  'shared-prefix',
  'chat',
] as const;
export type WorkloadName = (typeof WORKLOAD_NAMES)[number];

/** The router seed's load. */
export const SEED_LOAD = {
  ratePerS: 40,
  customers: 200,
  promptTokens: 8000,
  sharedTokens: 6000,
  outputTokens: 300,
} as const;

interface SharedPrefixParams {
  name: string;
  ratePerS: number;
  customers: number;
  sharedTokens: number;
  uniqueTokens: number;
  outputTokens: number;
  /** Share of traffic sent by customer 0; the rest is uniform over the others. */
  hotShare: number;
}

/** Poisson arrivals, customers drawn from a fixed set, prompt = customer prefix + own tokens. */
class SharedPrefixWorkload implements Workload {
  readonly name: string;
  readonly blockSize: number;
  readonly customers: number;
  readonly watchedCustomer = 0;
  readonly #p: SharedPrefixParams;
  readonly #opts: WorkloadOptions;
  readonly #prefixes: CustomerPrefixes;

  constructor(params: SharedPrefixParams, opts: WorkloadOptions) {
    this.name = params.name;
    this.blockSize = opts.blockSize;
    this.customers = params.customers;
    this.#p = params;
    this.#opts = opts;
    this.#prefixes = new CustomerPrefixes(opts, 0x5eed, params.customers, params.sharedTokens);
  }

  *arrivals(): Iterator<Arrival> {
    const p = this.#p;
    const gaps = Rng.derive(this.#opts.seed, `${p.name}:arrivals`);
    const picks = Rng.derive(this.#opts.seed, `${p.name}:customers`);
    const meanGapMs = 1000 / p.ratePerS;
    let atMs = gaps.exponential(meanGapMs);
    while (atMs < this.#opts.durationMs) {
      let customer: number;
      if (p.hotShare > 0 && picks.next() < p.hotShare) customer = 0;
      else customer = p.hotShare > 0 ? 1 + picks.int(p.customers - 1) : picks.int(p.customers);
      yield loadArrival(atMs, customer, p, picks.nextU32());
      atMs += gaps.exponential(meanGapMs);
    }
  }

  materialize(a: Arrival): Materialized {
    return this.#prefixes.prompt(a.customer, a.promptLength - this.#p.sharedTokens, a.seed);
  }

  prefixWatchKey(customer: number): BlockKey | null {
    return this.#prefixes.watchKey(customer);
  }
}

/** Fisher-Yates, from the last element down (the order the groups workload always drew). */
function shuffleInPlace(order: number[], rng: Rng): void {
  for (let i = order.length - 1; i > 0; i--) {
    const j = rng.int(i + 1);
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
}

/**
 * SGLang's generated shared-prefix benchmark: 64 groups x 16 prompts, a 2,048-token system
 * prompt per group, a 128-token question, 256 output tokens. The 1,024 prompts are sent in a
 * shuffled order at a Poisson rate; when the set runs out, a new shuffle with new questions.
 */
class GroupsWorkload implements Workload {
  readonly name = 'groups';
  readonly blockSize: number;
  readonly customers = 64;
  readonly watchedCustomer = 0;
  static readonly PROMPTS_PER_GROUP = 16;
  static readonly SYSTEM_TOKENS = 2048;
  static readonly QUESTION_TOKENS = 128;
  static readonly OUTPUT_TOKENS = 256;
  readonly #opts: WorkloadOptions;
  readonly #ratePerS: number;
  readonly #systemPrompts: CustomerPrefixes;

  constructor(opts: WorkloadOptions) {
    this.blockSize = opts.blockSize;
    this.#opts = opts;
    this.#ratePerS = opts.ratePerS ?? 40;
    this.#systemPrompts = new CustomerPrefixes(
      opts,
      0x6e0,
      this.customers,
      GroupsWorkload.SYSTEM_TOKENS,
    );
  }

  *arrivals(): Iterator<Arrival> {
    const gaps = Rng.derive(this.#opts.seed, 'groups:arrivals');
    const shuffle = Rng.derive(this.#opts.seed, 'groups:order');
    const slots = this.customers * GroupsWorkload.PROMPTS_PER_GROUP;
    const order = Array.from({ length: slots }, (_, i) => i);
    const meanGapMs = 1000 / this.#ratePerS;
    const burst = this.#opts.burst;
    if (burst) {
      if (burst.order === 'shuffled') shuffleInPlace(order, shuffle);
      for (const slot of order) yield this.#arrival(0, 0, slot);
      return;
    }
    let atMs = gaps.exponential(meanGapMs);
    for (let epoch = 0; atMs < this.#opts.durationMs; epoch++) {
      shuffleInPlace(order, shuffle);
      for (let k = 0; k < slots && atMs < this.#opts.durationMs; k++) {
        yield this.#arrival(atMs, epoch, order[k]!);
        atMs += gaps.exponential(meanGapMs);
      }
    }
  }

  #arrival(atMs: number, epoch: number, slot: number): Arrival {
    return {
      atMs,
      customer: Math.floor(slot / GroupsWorkload.PROMPTS_PER_GROUP),
      promptLength: GroupsWorkload.SYSTEM_TOKENS + GroupsWorkload.QUESTION_TOKENS,
      outputTokens: GroupsWorkload.OUTPUT_TOKENS,
      seed: mixSeed(epoch, slot),
    };
  }

  materialize(a: Arrival): Materialized {
    const streamSeed = mixSeed(this.#opts.seed, a.seed);
    return this.#systemPrompts.prompt(a.customer, GroupsWorkload.QUESTION_TOKENS, streamSeed);
  }

  prefixWatchKey(customer: number): BlockKey | null {
    return this.#systemPrompts.watchKey(customer);
  }
}

interface MultiturnTurn extends ConversationTurn {
  /** The conversation's last turn. */
  last: number;
}

/** The multi-turn workload's conversations: turns of a first message, then answer + user message. */
const MULTITURN = {
  firstTokens: 2000,
  userTokens: 350,
  outputTokens: 250,
  minTurns: 3,
  maxTurns: 8,
  thinkMs: 10_000,
} as const;

/**
 * Multi-turn chat: conversations start as a Poisson process; turn k's prompt is the whole
 * conversation so far (first message, then for each earlier turn its answer and the next user
 * message), so every turn extends the previous one. The conversation's text is one token
 * stream, so turn k's prompt is that stream's first L_k tokens. Turns are open loop: the next
 * one comes a think time after the previous arrival, not after its answer (the generator runs
 * ahead of the simulation). The engine's own output ids differ from the stream's, so a turn
 * hits the previous turn's prompt blocks, not its answer's.
 */
class MultiturnWorkload extends ConversationWorkload<MultiturnTurn> {
  readonly name = 'multiturn';

  constructor(opts: WorkloadOptions) {
    super(opts, 20);
  }

  protected turnDraws(): TurnDraws<MultiturnTurn> {
    const W = MULTITURN;
    const meanTurns = (W.minTurns + W.maxTurns) / 2;
    const starts = Rng.derive(this.opts.seed, 'multiturn:starts');
    const turns = Rng.derive(this.opts.seed, 'multiturn:turns');
    const meanStartGapMs = (1000 * meanTurns) / this.ratePerS;
    return {
      startGapMs: () => starts.exponential(meanStartGapMs),
      first: (atMs, conversation) => ({
        atMs,
        conversation,
        turn: 0,
        last: turns.range(W.minTurns, W.maxTurns) - 1,
      }),
      promptTokens: (t) => W.firstTokens + t.turn * (W.outputTokens + W.userTokens),
      outputTokens: () => W.outputTokens,
      hasNext: (t) => t.turn < t.last,
      thinkMs: () => turns.exponential(W.thinkMs),
    };
  }
}

export function makeWorkload(name: WorkloadName, opts: WorkloadOptions): Workload {
  const seedLoad = {
    ratePerS: opts.ratePerS ?? SEED_LOAD.ratePerS,
    customers: SEED_LOAD.customers,
    outputTokens: SEED_LOAD.outputTokens,
  };
  /** The seed's 8,000-token prompt with `sharedTokens` of it shared by each customer. */
  const seedShaped = (sharedTokens: number, hotShare: number) =>
    new SharedPrefixWorkload(
      {
        name,
        ...seedLoad,
        sharedTokens,
        uniqueTokens: SEED_LOAD.promptTokens - sharedTokens,
        hotShare,
      },
      opts,
    );
  switch (name) {
    case 'seed':
      return seedShaped(SEED_LOAD.sharedTokens, 0);
    case 'hot':
      return seedShaped(SEED_LOAD.sharedTokens, 0.1);
    case 'low-shared':
      // 15 % of the 8,000-token prompt shared: the seed's reversal condition.
      return seedShaped(Math.round(SEED_LOAD.promptTokens * 0.15), 0);
    case 'groups':
      return new GroupsWorkload(opts);
    case 'multiturn':
      return new MultiturnWorkload(opts);
    case 'lora':
      return new LoraWorkload(opts);
    case 'shared-prefix':
      return new SharedPrefixGroupsWorkload(opts, opts.sharedPrefix);
    case 'chat':
      return new ShareGptChatWorkload(opts);
  }
}
