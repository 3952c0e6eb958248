/**
 * Request bodies of the OpenAI endpoints, checked field by field into one plain shape. Every
 * problem is a 400 naming the field, as vLLM answers; sampling knobs the simulated engine has no
 * use for (temperature, top_p, stop, ...) are accepted and ignored, and so is `ignore_eos`: this
 * engine never samples an end-of-sequence token, so every request generates exactly max_tokens.
 */
import type { ChatTurn } from '../../tokenizer/chatTemplate.ts';
import { parseChatMessages } from '../../tokenizer/chatMessages.ts';
import { ApiError } from './errors.ts';

/** OpenAI's documented default for /v1/completions. */
export const DEFAULT_COMPLETION_MAX_TOKENS = 16;
/** Chat has no OpenAI default (vLLM fills the context); a bounded one keeps runs finite. */
export const DEFAULT_CHAT_MAX_TOKENS = 256;

export type PromptInput = { text: string } | { tokenIds: number[] };

export interface GenerationRequest {
  kind: 'completion' | 'chat';
  /** Model name asked for; null when absent (vLLM then uses the served model). */
  model: string | null;
  /** Completions: the prompt. Chat: null (the messages are rendered by the template). */
  prompt: PromptInput | null;
  messages: ChatTurn[] | null;
  maxTokens: number;
  stream: boolean;
  includeUsage: boolean;
  cacheSalt: string | null;
  /** Request seed, folded into the generator's seed when present. */
  seed: number | null;
  ignoreEos: boolean;
}

const bad = (message: string, param: string): ApiError =>
  new ApiError('ERR_BAD_REQUEST', message, param);

type Body = Record<string, unknown>;

function asObject(body: unknown): Body {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new ApiError('ERR_BAD_REQUEST', 'request body must be a JSON object');
  }
  return body as Body;
}

function optString(body: Body, field: string): string | null {
  const v = body[field];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string') throw bad(`'${field}' must be a string`, field);
  return v;
}

function optBool(body: Body, field: string): boolean | null {
  const v = body[field];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'boolean') throw bad(`'${field}' must be a boolean`, field);
  return v;
}

function optInt(body: Body, field: string): number | null {
  const v = body[field];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) {
    throw bad(`'${field}' must be an integer`, field);
  }
  return v;
}

function isTokenIds(v: unknown): v is number[] {
  return Array.isArray(v) && v.length > 0 && v.every((t) => typeof t === 'number');
}

function parsePrompt(raw: unknown, vocabSize: number): PromptInput {
  // A one-element batch is the same request; larger batches are not served (n = 1 only).
  if (
    Array.isArray(raw) &&
    raw.length === 1 &&
    (typeof raw[0] === 'string' || isTokenIds(raw[0]))
  ) {
    raw = raw[0];
  }
  if (typeof raw === 'string') {
    if (raw.length === 0) throw bad('prompt cannot be empty', 'prompt');
    return { text: raw };
  }
  if (isTokenIds(raw)) {
    for (const t of raw) {
      if (!Number.isInteger(t) || t < 0 || t >= vocabSize) {
        throw bad(`token id ${t} is out of vocabulary [0, ${vocabSize})`, 'prompt');
      }
    }
    return { tokenIds: raw };
  }
  if (Array.isArray(raw) && raw.length === 0) throw bad('prompt cannot be empty', 'prompt');
  if (Array.isArray(raw) && raw.length > 1) {
    throw bad('batched prompts are not supported; send one prompt per request', 'prompt');
  }
  throw bad("'prompt' must be a string or a list of token ids", 'prompt');
}

/** Fields both endpoints share. */
function parseCommon(body: Body, defaultMaxTokens: number, maxTokensField: string) {
  const maxTokens = optInt(body, maxTokensField) ?? defaultMaxTokens;
  if (maxTokens < 1)
    throw bad(`'${maxTokensField}' must be at least 1, got ${maxTokens}`, maxTokensField);
  const n = optInt(body, 'n') ?? 1;
  if (n !== 1) throw bad(`only n = 1 is supported, got n = ${n}`, 'n');
  const streamOptions = body.stream_options;
  if (streamOptions !== undefined && streamOptions !== null && typeof streamOptions !== 'object') {
    throw bad("'stream_options' must be an object", 'stream_options');
  }
  const includeUsage = optBool((streamOptions ?? {}) as Body, 'include_usage') ?? false;
  const cacheSalt = optString(body, 'cache_salt');
  if (cacheSalt === '') throw bad("'cache_salt' must be a non-empty string", 'cache_salt');
  const seed = optInt(body, 'seed');
  return {
    model: optString(body, 'model'),
    maxTokens,
    stream: optBool(body, 'stream') ?? false,
    includeUsage,
    cacheSalt,
    seed,
    ignoreEos: optBool(body, 'ignore_eos') ?? false,
  };
}

export function parseCompletionBody(raw: unknown, vocabSize: number): GenerationRequest {
  const body = asObject(raw);
  if (body.prompt === undefined) throw bad("'prompt' is required", 'prompt');
  const common = parseCommon(body, DEFAULT_COMPLETION_MAX_TOKENS, 'max_tokens');
  return {
    kind: 'completion',
    prompt: parsePrompt(body.prompt, vocabSize),
    messages: null,
    ...common,
  };
}

export function parseChatBody(raw: unknown): GenerationRequest {
  const body = asObject(raw);
  // max_completion_tokens is the newer name; max_tokens is still accepted (vLLM does both).
  const field = body.max_completion_tokens !== undefined ? 'max_completion_tokens' : 'max_tokens';
  const common = parseCommon(body, DEFAULT_CHAT_MAX_TOKENS, field);
  return { kind: 'chat', prompt: null, messages: parseChatMessages(body.messages, bad), ...common };
}

/** vLLM's context check: prompt plus max_tokens must fit the model's context window. */
export function checkContextLength(
  promptTokens: number,
  maxTokens: number,
  maxModelLen: number,
): void {
  if (promptTokens + maxTokens > maxModelLen) {
    throw new ApiError(
      'ERR_CONTEXT_LENGTH',
      `This model's maximum context length is ${maxModelLen} tokens. However, you requested ${promptTokens + maxTokens} tokens (${promptTokens} in the messages, ${maxTokens} in the completion). Please reduce the length of the messages or completion.`,
      'max_tokens',
    );
  }
}

export type TokenizeRequest =
  | { prompt: string; messages: null; addGenerationPrompt: boolean }
  | { prompt: null; messages: ChatTurn[]; addGenerationPrompt: boolean };

/** vLLM's /tokenize: `{prompt}` or `{messages, add_generation_prompt}`. */
export function parseTokenizeBody(raw: unknown): TokenizeRequest {
  const body = asObject(raw);
  const addGenerationPrompt = optBool(body, 'add_generation_prompt') ?? true;
  if (body.messages !== undefined) {
    return { prompt: null, messages: parseChatMessages(body.messages, bad), addGenerationPrompt };
  }
  const prompt = optString(body, 'prompt');
  if (prompt === null) throw bad("'prompt' or 'messages' is required", 'prompt');
  return { prompt, messages: null, addGenerationPrompt };
}
