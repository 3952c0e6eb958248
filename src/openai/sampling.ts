/**
 * The sampling fields of a completions or chat body, checked as vLLM checks them (its request
 * models in `vllm/entrypoints/openai/{completion,chat_completion}/protocol.py` and
 * `SamplingParams._verify_args` in `vllm/sampling_params.py`), with vLLM's messages. Only the
 * checks that need no server setting live here, so the gateway (which forwards the body as sent)
 * refuses exactly what any vLLM would; limits a server sets (`--max-logprobs`, tool parsers)
 * are the engine's (src/engine/server/validation.ts).
 */
import { badRequest } from './errors.ts';
import { type Body, optBool, optInt, optNumber } from './fields.ts';

/** vLLM's VLLM_MAX_N_SEQUENCES default. */
export const MAX_N = 16_384;

export type ToolChoice = 'none' | 'auto' | 'required' | { function: { name: string } };

export interface SamplingFields {
  /** Stop strings (vLLM's `stop`, a string or a list). */
  stop: string[];
  stopTokenIds: number[];
  includeStopStrInOutput: boolean;
  /** Tokens before a stop string or stop token may end a choice. */
  minTokens: number;
  ignoreEos: boolean;
  /**
   * Top log-probabilities per token: completions' `logprobs`, chat's `top_logprobs` when
   * `logprobs` is true (0 gives the chosen token's alone); -1: the whole vocabulary; null: none.
   */
  logprobs: number | null;
  echo: boolean;
  /** null: the server's default (vLLM: 1.0). */
  temperature: number | null;
  topP: number | null;
  /** 0 or -1: off. */
  topK: number | null;
  minP: number | null;
  /** Chat `tools` (their count; the engine never calls them) and `tool_choice`, defaulted as vLLM does. */
  tools: number;
  toolChoice: ToolChoice | null;
}

/** A `VLLMValidationError` with a parameter and value renders them after the message. */
const withValue = (message: string, param: string, value: unknown) =>
  badRequest(`${message} (parameter=${param}, value=${value})`, param);

export function readSampling(body: Body, chat: boolean): SamplingFields {
  const temperature = optNumber(body, 'temperature');
  if (temperature !== null) {
    if (temperature < 0) {
      throw withValue(
        `temperature must be non-negative, got ${temperature}.`,
        'temperature',
        temperature,
      );
    }
    if (temperature > 2) {
      throw withValue(
        `temperature must be in [0, 2], got ${temperature}.`,
        'temperature',
        temperature,
      );
    }
  }
  const topP = optNumber(body, 'top_p');
  if (topP !== null && !(topP > 0 && topP <= 1)) {
    throw withValue(`top_p must be in (0, 1], got ${topP}.`, 'top_p', topP);
  }
  const topK = optInt(body, 'top_k');
  if (topK !== null && topK < -1) {
    throw badRequest(`top_k must be 0 (disable), or at least 1, got ${topK}.`, 'top_k');
  }
  const minP = optNumber(body, 'min_p');
  if (minP !== null && !(minP >= 0 && minP <= 1)) {
    throw badRequest(`min_p must be in [0, 1], got ${minP}.`, 'min_p');
  }
  for (const penalty of ['presence_penalty', 'frequency_penalty']) {
    const v = optNumber(body, penalty);
    if (v !== null && !(v >= -2 && v <= 2)) {
      throw badRequest(`${penalty} must be in [-2, 2], got ${v}.`, penalty);
    }
  }
  const repetition = optNumber(body, 'repetition_penalty');
  if (repetition !== null && !(repetition > 0)) {
    throw badRequest(
      `repetition_penalty must be greater than zero, got ${repetition}.`,
      'repetition_penalty',
    );
  }
  const minTokens = optInt(body, 'min_tokens') ?? 0;
  if (minTokens < 0) {
    throw badRequest(
      `min_tokens must be greater than or equal to 0, got ${minTokens}.`,
      'min_tokens',
    );
  }
  return {
    stop: readStop(body.stop),
    stopTokenIds: readStopTokenIds(body.stop_token_ids),
    includeStopStrInOutput: optBool(body, 'include_stop_str_in_output') ?? false,
    minTokens,
    ignoreEos: optBool(body, 'ignore_eos') ?? false,
    logprobs: chat ? readChatLogprobs(body) : readCompletionLogprobs(body),
    echo: optBool(body, 'echo') ?? false,
    temperature,
    topP,
    topK,
    minP,
    ...(chat ? readTools(body) : { tools: 0, toolChoice: null }),
  };
}

/** n, as `_verify_num_sequences` checks it. */
export function readN(body: Body): number {
  const n = optInt(body, 'n') ?? 1;
  if (n < 1) throw badRequest(`n must be at least 1, got ${n}.`, 'n');
  if (n > MAX_N) {
    throw badRequest(
      `n must be at most ${MAX_N}, got ${n}. To increase this limit, set the VLLM_MAX_N_SEQUENCES environment variable.`,
      'n',
    );
  }
  return n;
}

function readStop(raw: unknown): string[] {
  if (raw === undefined || raw === null) return [];
  const list = typeof raw === 'string' ? [raw] : raw;
  if (!Array.isArray(list) || !list.every((s) => typeof s === 'string')) {
    throw badRequest("'stop' must be a string or a list of strings", 'stop');
  }
  if (list.some((s) => s.length === 0)) {
    throw badRequest('stop cannot contain an empty string.', 'stop');
  }
  return list;
}

function readStopTokenIds(raw: unknown): number[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw) || !raw.every((t) => Number.isSafeInteger(t))) {
    throw badRequest(
      `stop_token_ids must contain only integers, got ${JSON.stringify(raw)}.`,
      'stop_token_ids',
    );
  }
  return [...new Set(raw as number[])];
}

function readCompletionLogprobs(body: Body): number | null {
  const logprobs = optInt(body, 'logprobs');
  if (logprobs !== null && logprobs < 0 && logprobs !== -1) {
    throw withValue(`logprobs must be non-negative or -1, got ${logprobs}.`, 'logprobs', logprobs);
  }
  return logprobs;
}

function readChatLogprobs(body: Body): number | null {
  const logprobs = optBool(body, 'logprobs') ?? false;
  const top = optInt(body, 'top_logprobs');
  if (top !== null && top < 0 && top !== -1) {
    throw badRequest('`top_logprobs` must be a positive value or -1.', 'top_logprobs');
  }
  if (top !== null && top !== 0 && !logprobs) {
    throw badRequest('when using `top_logprobs`, `logprobs` must be set to true.', 'top_logprobs');
  }
  return logprobs ? (top ?? 0) : null;
}

function readTools(body: Body): { tools: number; toolChoice: ToolChoice | null } {
  const tools = body.tools;
  if (tools !== undefined && tools !== null && !Array.isArray(tools)) {
    throw badRequest("'tools' must be a list", 'tools');
  }
  const raw = body.tool_choice;
  const given = raw !== undefined && raw !== null;
  const count = Array.isArray(tools) ? tools.length : 0;
  if (given && !Array.isArray(tools)) {
    throw badRequest('When using `tool_choice`, `tools` must be set.', 'tool_choice');
  }
  if (!given) return { tools: count, toolChoice: Array.isArray(tools) ? 'auto' : null };
  if (raw === 'none' || raw === 'auto' || raw === 'required') {
    // "required" with an empty tools list is treated as "none" (vLLM's validator).
    return { tools: count, toolChoice: raw === 'required' && count === 0 ? 'none' : raw };
  }
  const name = (raw as { function?: { name?: unknown } }).function?.name;
  if (typeof raw === 'object' && typeof name === 'string') {
    const names = (tools as { function?: { name?: unknown } }[]).map((t) => t?.function?.name);
    if (!names.includes(name)) {
      throw badRequest(
        'The tool specified in `tool_choice` does not match any of the specified `tools`',
        'tool_choice',
      );
    }
    return { tools: count, toolChoice: { function: { name } } };
  }
  throw badRequest(
    `Invalid value for \`tool_choice\`: ${JSON.stringify(raw)}! Only named tools, "none", "auto" or "required" are supported.`,
    'tool_choice',
  );
}
