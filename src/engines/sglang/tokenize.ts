/**
 * SGLang's `POST /tokenize` (python/sglang/srt/entrypoints/openai/protocol.py,
 * `TokenizeRequest` / `TokenizeResponse`), as a pure request/response adapter.
 *
 * Request: `{model, prompt: str | list[str], add_special_tokens = true}`: text only. Unlike
 * vLLM's, it takes no `messages` (no chat form), so a chat prompt cannot be tokenized there.
 * Response: `{tokens: list[int] | list[list[int]], count: int | list[int], max_model_len}`.
 */

/** A gateway tokenize query as it would go to vLLM: `{prompt}` or `{messages, ...}`. */
export type TokenizeBody = Record<string, unknown>;

/** SGLang's body for a text prompt; null for a chat query, which SGLang cannot tokenize. */
export function sglangTokenizeRequest(body: TokenizeBody): TokenizeBody | null {
  if (typeof body.prompt !== 'string') return null;
  const out: TokenizeBody = { prompt: body.prompt };
  if (typeof body.model === 'string') out.model = body.model;
  if (typeof body.add_special_tokens === 'boolean') {
    out.add_special_tokens = body.add_special_tokens;
  }
  return out;
}

export interface TokenizeAnswer {
  ids: number[];
  maxModelLen: number | null;
}

/** The ids of a single-prompt answer; null when the answer is not one. */
export function readSglangTokenizeResponse(json: unknown): TokenizeAnswer | null {
  if (typeof json !== 'object' || json === null) return null;
  const { tokens, max_model_len: maxLen } = json as Record<string, unknown>;
  // A list of one prompt answers a list of lists; a single prompt, a flat list.
  const ids =
    Array.isArray(tokens) && tokens.length === 1 && Array.isArray(tokens[0]) ? tokens[0] : tokens;
  if (!Array.isArray(ids) || !ids.every((t) => Number.isSafeInteger(t) && t >= 0)) return null;
  return {
    ids: ids as number[],
    maxModelLen: Number.isSafeInteger(maxLen) ? (maxLen as number) : null,
  };
}
