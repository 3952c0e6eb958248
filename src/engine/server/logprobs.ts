/**
 * Log-probabilities in vLLM's response shapes, from the simulated model's distribution
 * (textGen.ts). vLLM keeps, per position, a dict of the chosen token first and then the top-N
 * ranks (the chosen one once, where it first appears: `_make_logprob_dict` in
 * vllm/v1/engine/logprobs.py), and renders it two ways:
 * - completions (`_create_completion_logprobs`): `tokens`, `token_logprobs`, `top_logprobs` (the
 *   whole dict: N + 1 entries, or N when the chosen token is among the top N) and
 *   `text_offset`; an echoed prompt's first token has no log-probability (null, null);
 * - chat (`_create_chat_logprobs`): `content: [{token, logprob, bytes, top_logprobs}]` with the
 *   dict's first N entries as `top_logprobs` (so the chosen token leads them).
 * Values are floored at -9999.0 as vLLM floors them.
 */
import type { SimulatedModel } from './textGen.ts';

/** One position: the token there, where it ranked, and the distribution's rotation. */
export interface TokenAt {
  tokenId: number;
  text: string;
  /** Raw log-probability of the token. */
  logprob: number;
  /** Rotation of the distribution at this position (see SimulatedModel). */
  offset: number;
}

export interface CompletionLogprobs {
  text_offset: number[];
  token_logprobs: (number | null)[];
  tokens: string[];
  top_logprobs: (Record<string, number> | null)[];
}

export interface ChatLogprob {
  token: string;
  logprob: number;
  bytes: number[];
}

export interface ChatLogprobsContent extends ChatLogprob {
  top_logprobs: ChatLogprob[];
}

const floor = (lp: number) => Math.max(lp, -9999);

/** The position's dict as vLLM builds it: the chosen token, then the top `n` ranks. */
function stepDict(model: SimulatedModel, at: TokenAt, n: number): [string, number][] {
  const out: [string, number][] = [[at.text, floor(at.logprob)]];
  const seen = new Set([at.text]);
  for (let rank = 0; rank < Math.min(n, model.size); rank++) {
    const word = model.wordAt(at.offset, rank);
    const text = model.texts[word]!;
    if (seen.has(text)) continue;
    seen.add(text);
    out.push([text, floor(model.rankLogprobs[rank]!)]);
  }
  return out;
}

/**
 * Completions logprobs for `positions` (null: an echoed prompt's first token, which has none),
 * text offsets counting from `initialOffset`.
 */
export function completionLogprobs(
  model: SimulatedModel,
  positions: readonly (TokenAt | { text: string; logprob: null })[],
  n: number,
  initialOffset: number,
): CompletionLogprobs {
  const out: CompletionLogprobs = {
    text_offset: [],
    token_logprobs: [],
    tokens: [],
    top_logprobs: [],
  };
  let offset = initialOffset;
  for (const at of positions) {
    out.text_offset.push(offset);
    offset += at.text.length;
    out.tokens.push(at.text);
    if (at.logprob === null) {
      out.token_logprobs.push(null);
      out.top_logprobs.push(null);
      continue;
    }
    out.token_logprobs.push(floor(at.logprob));
    out.top_logprobs.push(Object.fromEntries(stepDict(model, at as TokenAt, n)));
  }
  return out;
}

const utf8 = (s: string): number[] => [...Buffer.from(s, 'utf8')];

/** Chat logprobs content entries for generated tokens. */
export function chatLogprobs(
  model: SimulatedModel,
  positions: readonly TokenAt[],
  n: number,
): ChatLogprobsContent[] {
  return positions.map((at) => ({
    token: at.text,
    logprob: floor(at.logprob),
    bytes: utf8(at.text),
    top_logprobs: stepDict(model, at, n)
      .slice(0, n)
      .map(([token, logprob]) => ({ token, logprob, bytes: utf8(token) })),
  }));
}
