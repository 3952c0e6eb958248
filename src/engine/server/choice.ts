/**
 * One choice's output text as vLLM's output processor builds it (vllm/v1/engine/detokenizer.py
 * and vllm/v1/core/sched/utils.py's check_stop): each new token is appended; a stop token id
 * ends the choice (its text left out unless include_stop_str_in_output); stop strings are looked
 * for in the text just added and cut it (`check_stop_strings`), the stop string itself left out
 * unless include_stop_str_in_output; neither can end a choice before `min_tokens` tokens, and
 * stop token ids cannot even be drawn before then (vLLM's min-tokens logits processor). A stream
 * holds back the last `longest stop string - 1` characters until the choice ends, so a stop
 * string is never sent in part. Every drawn token counts as a completion token.
 */
import type { DrawnToken } from './textGen.ts';

/** Where a choice's tokens come from (textGen.ts's TokenSampler). */
export interface TokenSource {
  next(banned?: ReadonlySet<number>): DrawnToken;
}

export interface StopRules {
  stop: readonly string[];
  stopTokenIds: readonly number[];
  includeStopStrInOutput: boolean;
  minTokens: number;
  maxTokens: number;
  /**
   * End-of-generation ids of a real model (vLLM's EOS check, off with ignore_eos): the choice
   * stops with stop_reason null and the token's text left out; not before min_tokens.
   */
  eosTokenIds?: readonly number[];
}

export interface Finish {
  reason: 'stop' | 'length';
  /** The stop string or stop token id that ended the choice; null for length. */
  stopReason: string | number | null;
}

export interface ChoiceStep {
  token: DrawnToken;
  /** Text released by this token (may be empty while a possible stop string is held back). */
  delta: string;
  finish: Finish | null;
}

/**
 * vLLM's check_stop_strings: the first stop string (in list order) found in the text's last
 * `newChars + len(stop) - 1` characters; where to cut the text (-1: nowhere).
 */
export function checkStopStrings(
  text: string,
  newChars: number,
  stop: readonly string[],
  includeInOutput: boolean,
): [string, number] | null {
  if (newChars === 0 || stop.length === 0) return null;
  for (const s of stop) {
    // Python's str.find with a negative start counts from the end.
    const from = Math.max(0, text.length + (1 - newChars - s.length));
    let at = text.indexOf(s, from);
    if (at === -1) continue;
    if (includeInOutput) {
      at += s.length;
      if (at >= text.length) return [s, -1];
    }
    return [s, at];
  }
  return null;
}

export class ChoiceText {
  tokens = 0;
  finish: Finish | null = null;
  readonly #sampler: TokenSource;
  readonly #rules: StopRules;
  readonly #stopIds: ReadonlySet<number>;
  readonly #eosIds: ReadonlySet<number>;
  /** Characters a stop string can reach back before new text (longest stop string - 1). */
  readonly #reach: number;
  readonly #holdback: number;
  /** The text in pieces (joined once, at the end), its length, and where a stop cut it. */
  readonly #pieces: string[] = [];
  #length = 0;
  #cutAt = -1;
  /** The last #reach characters: what a stop string found in new text may begin in. */
  #tail = '';
  /** Text not released yet, and how much was. */
  #pending = '';
  #released = 0;

  constructor(sampler: TokenSource, rules: StopRules) {
    this.#sampler = sampler;
    this.#rules = rules;
    this.#stopIds = new Set(rules.stopTokenIds);
    this.#eosIds = new Set(rules.eosTokenIds ?? []);
    this.#reach = rules.stop.length > 0 ? Math.max(...rules.stop.map((s) => s.length)) - 1 : 0;
    this.#holdback = rules.includeStopStrInOutput ? 0 : this.#reach;
  }

  /** The choice's text (cut at a stop string once one is found). */
  get text(): string {
    const all = this.#pieces.join('');
    return this.#cutAt >= 0 ? all.slice(0, this.#cutAt) : all;
  }

  /** Draws the next token and applies the stop rules to it. */
  step(): ChoiceStep {
    const rules = this.#rules;
    const banned = this.tokens < rules.minTokens ? this.#stopIds : undefined;
    const token = this.#sampler.next(banned);
    this.tokens++;
    const stopToken = this.#stopIds.has(token.tokenId) && this.tokens >= rules.minTokens;
    const eos = !stopToken && this.#eosIds.has(token.tokenId) && this.tokens >= rules.minTokens;
    const piece = (stopToken && !rules.includeStopStrInOutput) || eos ? '' : token.text;
    this.#pieces.push(piece);
    this.#length += piece.length;
    this.#pending += piece;
    let finish: Finish | null = null;
    if (stopToken) finish = { reason: 'stop', stopReason: token.tokenId };
    else if (eos) finish = { reason: 'stop', stopReason: null };
    else if (rules.stop.length > 0) {
      // Text of the first min_tokens tokens is never searched (vLLM's stop_check_offset).
      const window = this.#tail + piece;
      const hit =
        this.tokens > rules.minTokens
          ? checkStopStrings(window, piece.length, rules.stop, rules.includeStopStrInOutput)
          : null;
      if (hit) {
        if (hit[1] !== -1) this.#cut(this.#length - window.length + hit[1]);
        finish = { reason: 'stop', stopReason: hit[0] };
      }
      this.#tail = this.#reach > 0 ? window.slice(-this.#reach) : '';
    }
    if (!finish && this.tokens >= rules.maxTokens) finish = { reason: 'length', stopReason: null };
    this.finish = finish;
    return { token, delta: this.#release(finish !== null), finish };
  }

  #cut(at: number): void {
    this.#cutAt = at;
    // What was released stays released (the hold-back keeps a stop string from being sent).
    this.#pending = this.#pending.slice(0, Math.max(0, at - this.#released));
  }

  /** vLLM's get_next_output_text: new text, less what a stop string might still claim. */
  #release(finished: boolean): string {
    const keep = finished ? 0 : this.#holdback;
    const count = this.#pending.length - keep;
    if (count <= 0) return '';
    const delta = this.#pending.slice(0, count);
    this.#pending = this.#pending.slice(count);
    this.#released += count;
    return delta;
  }
}
