/**
 * Multi-turn chat with ShareGPT-like lengths, parametric (no dataset read):
 * - each user message and each answer is drawn from a log-normal law whose means are ShareGPT's
 *   per-request figures in the vLLM paper (Kwon et al., SOSP 2023, section 6.1 and its
 *   figure 11: 161 input and 338 output tokens on average, 8.4x and 5.8x Alpaca's 19.3 and
 *   58.5); the spread, sigma = 1 (the histograms' long right tail), is an assumption, not a fit;
 * - turns per conversation are geometric with ShareGPT's mean of 3.51 (94,145 conversations,
 *   330,239 turns: the ShareChat paper, arXiv 2512.17843, table 1), at most 32;
 * - turn k's prompt is the conversation so far (every earlier message and answer, then the new
 *   message), so it grows with the history, as vLLM's `benchmarks/multi_turn` client and
 *   SGLang's multi-turn benchmark send it.
 * Conversations start as a Poisson process; the next turn comes a think time (exponential,
 * mean 10 s) after the previous one's arrival (open loop, as the `multiturn` workload).
 */
import { Rng } from '../util/rng.ts';
import {
  type ConversationTurn,
  ConversationWorkload,
  type TurnDraws,
} from './conversationWorkload.ts';
import type { WorkloadOptions } from './types.ts';

export const SHAREGPT_LENGTHS = {
  meanUserTokens: 161,
  meanOutputTokens: 338,
  sigma: 1,
  meanTurns: 3.51,
  maxTurns: 32,
  maxUserTokens: 4096,
  maxOutputTokens: 2048,
  thinkMs: 10_000,
} as const;

/** A log-normal draw with mean `mean` and log-spread `sigma`, rounded, in [1, max]. */
export function logNormalTokens(rng: Rng, mean: number, sigma: number, max: number): number {
  // Box-Muller; mu so that the mean is exp(mu + sigma^2 / 2) = mean.
  const u = 1 - rng.next();
  const z = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rng.next());
  const mu = Math.log(mean) - (sigma * sigma) / 2;
  return Math.min(max, Math.max(1, Math.round(Math.exp(mu + sigma * z))));
}

interface Turn extends ConversationTurn {
  /** Per turn: the user message's and the answer's tokens. */
  user: number[];
  output: number[];
}

export class ShareGptChatWorkload extends ConversationWorkload<Turn> {
  readonly name = 'chat';

  constructor(opts: WorkloadOptions) {
    super(opts, 20);
  }

  protected turnDraws(): TurnDraws<Turn> {
    const L = SHAREGPT_LENGTHS;
    const starts = Rng.derive(this.opts.seed, 'chat:starts');
    const draws = Rng.derive(this.opts.seed, 'chat:lengths');
    const meanStartGapMs = (1000 * L.meanTurns) / this.ratePerS;
    return {
      startGapMs: () => starts.exponential(meanStartGapMs),
      first: (atMs, conversation) => {
        // Geometric turns with mean meanTurns: stop after each turn with 1 / meanTurns.
        let turns = 1;
        while (turns < L.maxTurns && draws.next() >= 1 / L.meanTurns) turns++;
        const user = Array.from({ length: turns }, () =>
          logNormalTokens(draws, L.meanUserTokens, L.sigma, L.maxUserTokens),
        );
        const output = Array.from({ length: turns }, () =>
          logNormalTokens(draws, L.meanOutputTokens, L.sigma, L.maxOutputTokens),
        );
        return { atMs, conversation, turn: 0, user, output };
      },
      promptTokens: (t) => {
        let history = 0;
        for (let k = 0; k < t.turn; k++) history += t.user[k]! + t.output[k]!;
        return history + t.user[t.turn]!;
      },
      outputTokens: (t) => t.output[t.turn]!,
      hasNext: (t) => t.turn + 1 < t.user.length,
      thinkMs: () => draws.exponential(L.thinkMs),
    };
  }
}
