/**
 * The engine's own checks on top of the shared request reader (`src/openai/request.ts`): what
 * this simulated engine can serve (one prompt, n = 1), its max_tokens defaults, the context
 * window. Sampling knobs it has no use for (temperature, top_p, stop, ...) are accepted and
 * ignored, and so is `ignore_eos`: this engine never samples an end-of-sequence token, so every
 * request generates exactly max_tokens.
 */
import { ApiError, badRequest } from '../../openai/errors.ts';
import type { Endpoint, GenerationRequest, PromptInput } from '../../openai/request.ts';
import type { ChatTurn } from '../../tokenizer/chatTemplate.ts';

/** OpenAI's documented default for /v1/completions. */
export const DEFAULT_COMPLETION_MAX_TOKENS = 16;
/** Chat has no OpenAI default (vLLM fills the context); a bounded one keeps runs finite. */
export const DEFAULT_CHAT_MAX_TOKENS = 256;

/** One request as the engine serves it. */
export interface Generation {
  endpoint: Endpoint;
  /** Completions: the prompt. Chat: null (the messages are rendered by the template). */
  prompt: PromptInput | null;
  messages: ChatTurn[] | null;
  maxTokens: number;
  stream: boolean;
  includeUsage: boolean;
  cacheSalt: string | null;
  /** Request seed, folded into the generator's seed when present. */
  seed: number | null;
}

export function toGeneration(req: GenerationRequest): Generation {
  if (req.n !== 1) throw badRequest(`only n = 1 is supported, got n = ${req.n}`, 'n');
  const chat = req.endpoint === 'chat';
  if (!chat && req.prompts.length > 1) {
    throw badRequest('batched prompts are not supported; send one prompt per request', 'prompt');
  }
  return {
    endpoint: req.endpoint,
    prompt: chat ? null : req.prompts[0]!,
    messages: chat ? req.messages : null,
    maxTokens: req.maxTokens ?? (chat ? DEFAULT_CHAT_MAX_TOKENS : DEFAULT_COMPLETION_MAX_TOKENS),
    stream: req.stream,
    includeUsage: req.includeUsage,
    cacheSalt: req.cacheSalt,
    seed: req.seed,
  };
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
