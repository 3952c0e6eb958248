/**
 * What the multi-turn workloads (`multiturn`, `chat`) share: conversations start as a Poisson
 * process, and each turn after the first comes a think time after the previous turn's arrival
 * (open loop: the generator runs ahead of the simulation). Turn k's prompt is the conversation
 * so far, so its keys extend the previous turn's (`ConversationKeys`). A workload says only how
 * its conversations are drawn (`TurnDraws`).
 */
import type { BlockKey } from '../kv/blockKey.ts';
import type { Arrival } from './arrival.ts';
import { ConversationKeys } from './conversationKeys.ts';
import { type Materialized, mixSeed } from './tokens.ts';
import type { Workload, WorkloadOptions } from './types.ts';

/** One turn of one conversation; a workload adds what it drew for the conversation. */
export interface ConversationTurn {
  atMs: number;
  conversation: number;
  turn: number;
}

/** One pass's draws: each call of `arrivals()` takes a fresh set, so the streams restart. */
export interface TurnDraws<T extends ConversationTurn> {
  /** The gap before the next conversation starts, ms. */
  startGapMs(): number;
  /** A new conversation's first turn (turn 0 at `atMs`). */
  first(atMs: number, conversation: number): T;
  promptTokens(t: T): number;
  outputTokens(t: T): number;
  /** Whether the conversation has a turn after `t`. */
  hasNext(t: T): boolean;
  /** The think time before the next turn, ms. */
  thinkMs(): number;
}

export abstract class ConversationWorkload<T extends ConversationTurn> implements Workload {
  abstract readonly name: string;
  readonly blockSize: number;
  readonly customers = 0;
  readonly watchedCustomer = null;
  protected readonly opts: WorkloadOptions;
  protected readonly ratePerS: number;
  /** Keys of each live conversation's latest prompt, extended turn by turn. */
  readonly #conversations: ConversationKeys;

  constructor(opts: WorkloadOptions, defaultRatePerS: number) {
    this.blockSize = opts.blockSize;
    this.opts = opts;
    this.ratePerS = opts.ratePerS ?? defaultRatePerS;
    this.#conversations = new ConversationKeys(opts.blockSize);
  }

  protected abstract turnDraws(): TurnDraws<T>;

  *arrivals(): Iterator<Arrival> {
    const draws = this.turnDraws();
    // Pending next turns, kept sorted by time (few live conversations, so a sorted insert).
    const pending: T[] = [];
    let nextStartMs = draws.startGapMs();
    let conversations = 0;
    for (;;) {
      const head = pending[0];
      const startFirst = head === undefined || nextStartMs <= head.atMs;
      const atMs = startFirst ? nextStartMs : head.atMs;
      if (atMs >= this.opts.durationMs) return;
      let t: T;
      if (startFirst) {
        t = draws.first(atMs, conversations++);
        nextStartMs += draws.startGapMs();
      } else {
        t = pending.shift()!;
      }
      yield {
        atMs,
        customer: t.conversation,
        promptLength: draws.promptTokens(t),
        outputTokens: draws.outputTokens(t),
        seed: mixSeed(this.opts.seed, t.conversation),
      };
      if (draws.hasNext(t)) {
        const next: T = { ...t, atMs: atMs + draws.thinkMs(), turn: t.turn + 1 };
        let i = pending.length;
        while (i > 0 && pending[i - 1]!.atMs > next.atMs) i--;
        pending.splice(i, 0, next);
      }
    }
  }

  materialize(a: Arrival): Materialized {
    return this.#conversations.materialize(a);
  }

  prefixWatchKey(): BlockKey | null {
    return null;
  }
}
