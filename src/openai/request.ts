/**
 * The one reader of `/v1/completions` and `/v1/chat/completions` bodies: the fields both servers
 * care about, checked as vLLM's request models check them, into one plain shape. Every problem
 * is a 400 naming the field. What a server then does is its own business: the gateway tokenizes
 * and keys the prompt and forwards the body as sent, the engine generates. Sampling fields are
 * read and checked by `sampling.ts`; fields neither server reads pass through unread (vLLM
 * accepts unknown fields too).
 */
import type { ChatTurn } from '../tokenizer/chatTemplate.ts';
import { parseChatMessages } from './chatMessages.ts';
import { badRequest } from './errors.ts';
import { asObject, type Body, optBool, optInt, optString } from './fields.ts';
import { readN, readSampling, type SamplingFields } from './sampling.ts';

export type Endpoint = 'completions' | 'chat';

export type PromptInput = { text: string } | { tokenIds: number[] };

interface RequestFields {
  /** Model name asked for; null when absent (a server then uses its own). */
  model: string | null;
  stream: boolean;
  /**
   * `stream_options.include_usage`: a last chunk with the usage before `[DONE]`. vLLM's
   * StreamOptions defaults it to true, so `stream_options: {}` asks for the usage chunk.
   */
  includeUsage: boolean;
  cacheSalt: string | null;
  /** vLLM's `priority` (lower is served first); null when absent. */
  priority: number | null;
  seed: number | null;
  /** Choices asked for (>= 1). */
  n: number;
  /** Tokens to generate (>= 1); null when absent, for the server's default. */
  maxTokens: number | null;
  ignoreEos: boolean;
  sampling: SamplingFields;
}

export interface CompletionRequest extends RequestFields {
  endpoint: 'completions';
  /** One prompt, or a batch (vLLM accepts lists of strings and of token-id lists). */
  prompts: PromptInput[];
}

export interface ChatRequest extends RequestFields {
  endpoint: 'chat';
  messages: ChatTurn[];
}

export type GenerationRequest = CompletionRequest | ChatRequest;

/** Reads a parsed JSON body; token ids must lie in [0, vocabSize). Throws ApiError (400). */
export function readGenerationRequest(
  endpoint: Endpoint,
  raw: unknown,
  vocabSize: number,
): GenerationRequest {
  const body = asObject(raw);
  if (endpoint === 'completions') {
    if (body.prompt === undefined || body.prompt === null) {
      throw badRequest("'prompt' is required", 'prompt');
    }
    const fields = readFields(body, optInt(body, 'max_tokens', 1), false);
    return { endpoint, ...fields, prompts: readPrompts(body.prompt, vocabSize) };
  }
  // max_completion_tokens is the newer name; max_tokens is still accepted (vLLM reads both).
  const maxTokens = optInt(body, 'max_tokens', 1);
  const fields = readFields(body, optInt(body, 'max_completion_tokens', 1) ?? maxTokens, true);
  return { endpoint, ...fields, messages: parseChatMessages(body.messages) };
}

function readFields(body: Body, maxTokens: number | null, chat: boolean): RequestFields {
  const stream = optBool(body, 'stream') ?? false;
  const streamOptions = body.stream_options;
  let includeUsage = false;
  if (streamOptions !== undefined && streamOptions !== null) {
    if (typeof streamOptions !== 'object' || Array.isArray(streamOptions)) {
      throw badRequest("'stream_options' must be an object", 'stream_options');
    }
    if (!stream) {
      throw badRequest('Stream options can only be defined when `stream=True`.', 'stream_options');
    }
    includeUsage = optBool(streamOptions as Body, 'include_usage') ?? true;
  }
  const cacheSalt = optString(body, 'cache_salt');
  if (cacheSalt === '') throw badRequest("'cache_salt' must be a non-empty string", 'cache_salt');
  const sampling = readSampling(body, chat);
  return {
    model: optString(body, 'model'),
    stream,
    includeUsage,
    cacheSalt,
    priority: optInt(body, 'priority'),
    seed: optInt(body, 'seed'),
    n: readN(body),
    maxTokens,
    ignoreEos: sampling.ignoreEos,
    sampling,
  };
}

function readPrompts(raw: unknown, vocabSize: number): PromptInput[] {
  if (typeof raw === 'string' || isTokenIds(raw)) return [readPrompt(raw, vocabSize)];
  if (Array.isArray(raw)) {
    if (raw.length === 0) throw badRequest('prompt cannot be empty', 'prompt');
    if (raw.every((p) => typeof p === 'string') || raw.every(isTokenIds)) {
      return raw.map((p: string | number[]) => readPrompt(p, vocabSize));
    }
  }
  throw badRequest("'prompt' must be a string, a list of token ids, or a list of either", 'prompt');
}

function readPrompt(raw: string | number[], vocabSize: number): PromptInput {
  if (typeof raw === 'string') {
    if (raw.length === 0) throw badRequest('prompt cannot be empty', 'prompt');
    return { text: raw };
  }
  for (const t of raw) {
    if (!Number.isInteger(t) || t < 0 || t >= vocabSize) {
      throw badRequest(`token id ${t} is out of vocabulary [0, ${vocabSize})`, 'prompt');
    }
  }
  return { tokenIds: raw };
}

function isTokenIds(v: unknown): v is number[] {
  return Array.isArray(v) && v.length > 0 && v.every((t) => typeof t === 'number');
}
