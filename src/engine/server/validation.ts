/**
 * The engine's own checks on top of the shared request reader (`src/openai/request.ts`): what
 * this simulated engine can serve (one prompt per request), its max_tokens defaults, the checks
 * that depend on server settings as vLLM makes them (`--max-logprobs`, tool choice against
 * `--enable-auto-tool-choice` / `--tool-call-parser`, min_tokens against the resolved
 * max_tokens, greedy sampling with n > 1) and the context window.
 */
import { ApiError, badRequest } from '../../openai/errors.ts';
import type { Endpoint, GenerationRequest, PromptInput } from '../../openai/request.ts';
import type { SamplingFields } from '../../openai/sampling.ts';
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
  /** The LoRA adapter the request's `model` names; null: the base model. */
  loraName: string | null;
  /** Lower is scheduled first (vLLM's `priority`); null: 0. */
  priority: number | null;
  /** Request seed, folded into the generator's seed when present. */
  seed: number | null;
  /** Choices to generate, each an engine request of its own (as vLLM fans out n). */
  n: number;
  sampling: SamplingFields;
}

/** vLLM's `--max-logprobs` default. */
export const DEFAULT_MAX_LOGPROBS = 20;
/** Below this temperature vLLM samples greedily (`_SAMPLING_EPS`). */
const GREEDY_TEMPERATURE = 1e-5;

/** The server settings the engine's checks depend on (vLLM's flags of the same names). */
export interface ServingLimits {
  /** --max-logprobs (-1: the vocabulary size). */
  maxLogprobs: number;
  vocabSize: number;
  /** --enable-auto-tool-choice */
  enableAutoToolChoice: boolean;
  /** --tool-call-parser */
  toolCallParser: string | null;
}

export function toGeneration(req: GenerationRequest, limits: ServingLimits): Generation {
  const chat = req.endpoint === 'chat';
  if (!chat && req.prompts.length > 1) {
    throw badRequest('batched prompts are not supported; send one prompt per request', 'prompt');
  }
  const maxTokens =
    req.maxTokens ?? (chat ? DEFAULT_CHAT_MAX_TOKENS : DEFAULT_COMPLETION_MAX_TOKENS);
  const sampling = req.sampling;
  if (sampling.minTokens > maxTokens) {
    throw badRequest(
      `min_tokens must be less than or equal to max_tokens=${maxTokens}, got ${sampling.minTokens}.`,
      'min_tokens',
    );
  }
  if (sampling.logprobs !== null) {
    const asked = sampling.logprobs === -1 ? limits.vocabSize : sampling.logprobs;
    const max = limits.maxLogprobs === -1 ? limits.vocabSize : limits.maxLogprobs;
    if (asked > max) {
      throw badRequest(
        `Requested sample logprobs of ${asked}, which is greater than max allowed: ${max}`,
        'logprobs',
      );
    }
  }
  if (req.n > 1 && sampling.temperature !== null && sampling.temperature < GREEDY_TEMPERATURE) {
    throw badRequest(`n must be 1 when using greedy sampling, got ${req.n}.`, 'n');
  }
  checkToolChoice(sampling, limits);
  return {
    endpoint: req.endpoint,
    prompt: chat ? null : req.prompts[0]!,
    messages: chat ? req.messages : null,
    maxTokens,
    stream: req.stream,
    includeUsage: req.includeUsage,
    cacheSalt: req.cacheSalt,
    loraName: null,
    priority: req.priority,
    seed: req.seed,
    n: req.n,
    sampling,
  };
}

/**
 * vLLM's chat serving without a tool parser (vllm/entrypoints/openai/chat_completion/serving.py):
 * "auto" needs --enable-auto-tool-choice, "required" and named tools need --tool-call-parser.
 * With them, "auto" is served (the simulated model answers in text, never with a tool call);
 * a forced tool call is refused, since this engine cannot produce one.
 */
function checkToolChoice(sampling: SamplingFields, limits: ServingLimits): void {
  const choice = sampling.toolChoice;
  if (choice === null || choice === 'none') return;
  if (choice === 'auto') {
    if (!limits.enableAutoToolChoice) {
      throw badRequest(
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
      );
    }
    return;
  }
  const shown =
    typeof choice === 'string' ? choice : JSON.stringify({ type: 'function', ...choice });
  if (limits.toolCallParser === null) {
    throw badRequest(`tool_choice="${shown}" requires --tool-call-parser to be set`);
  }
  throw badRequest(
    `tool_choice="${shown}" is not supported by kvroute engine: its simulated model never calls tools`,
    'tool_choice',
  );
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
