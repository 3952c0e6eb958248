/**
 * The OpenAI-compatible endpoints vLLM serves, as plain functions of (context, body, response).
 * They throw ApiError (or the core's EngineError); the server turns those into error bodies.
 * Prompts are tokenized in slices (`PromptTokenizer.tokenize`) that stop once the prompt cannot
 * fit the context window, so a huge prompt is refused without holding the event loop.
 */
import type { ServerResponse } from 'node:http';
import { ApiError, badRequest } from '../../openai/errors.ts';
import { asObject, type Body, optBool, optString } from '../../openai/fields.ts';
import { sendJson } from '../../openai/http.ts';
import { type Endpoint, readGenerationRequest } from '../../openai/request.ts';
import { completionAddSpecialTokens, readChatInput } from '../../openai/templateFields.ts';
import { TokenizerError } from '../../tokenizer/errors.ts';
import type { PromptInput, PromptTokenizer, Tokenized } from '../../tokenizer/promptTokenizer.ts';
import { readKvTransferParams } from '../connector/params.ts';
import {
  prefillTransfer,
  pullRemote,
  type TransferContext,
  transferClientOf,
} from '../connector/transfer.ts';
import type { AdapterRegistry } from './adapters.ts';
import { type GenerationContext, serveGeneration } from './generate.ts';
import { checkContextLength, type Generation, toGeneration } from './validation.ts';

export interface HandlerContext extends GenerationContext {
  modelName: string;
  /** Every name the model answers to (vLLM's --served-model-name list), the response's first. */
  servedModelNames: readonly string[];
  maxModelLen: number;
  createdS: number;
  /** LoRA adapters loaded (empty when LoRA is off). */
  adapters: AdapterRegistry;
  /** Prompts and chats to ids (the `tokenizer` of GenerationContext is its `text`). */
  prompts: PromptTokenizer;
  /** Generation's own rendering when it differs from /tokenize's (a fault: `faults.ts`). */
  generationPrompts?: PromptTokenizer;
  /** The NixlConnector's side (--kv-transfer-config); null: kv_transfer_params are ignored. */
  kvTransfer?: TransferContext | null;
}

/**
 * vLLM's `_check_model`: no model or a served name is the base model, a loaded adapter's name
 * runs with that adapter, anything else is a 404. Returns the adapter's name, or null.
 */
function resolveModel(ctx: HandlerContext, model: string | null): string | null {
  if (model === null || model === '' || ctx.servedModelNames.includes(model)) return null;
  if (ctx.adapters.get(model) !== undefined) return model;
  throw new ApiError('ERR_MODEL_NOT_FOUND', `The model \`${model}\` does not exist.`, 'model');
}

/** Tokenizes in slices; a template that refuses the chat is the request's 400, as in vLLM. */
async function tokenizeInput(
  prompts: PromptTokenizer,
  input: PromptInput,
  limitTokens?: number,
): Promise<Tokenized> {
  try {
    return await prompts.tokenize(input, limitTokens);
  } catch (err) {
    if (err instanceof TokenizerError && err.code === 'ERR_TEMPLATE') {
      throw badRequest(err.message, 'messages');
    }
    throw err;
  }
}

async function promptTokensOf(ctx: HandlerContext, body: Body, gen: Generation): Promise<number[]> {
  let input: PromptInput;
  if (gen.endpoint === 'chat') input = { kind: 'chat', chat: readChatInput(body) };
  else {
    const prompt = gen.prompt!;
    if ('tokenIds' in prompt) return prompt.tokenIds;
    const addSpecialTokens = completionAddSpecialTokens(body);
    input = { kind: 'completion', text: prompt.text, addSpecialTokens };
  }
  // More prompt tokens than this can never run: stop counting there.
  const limit = Math.max(0, ctx.maxModelLen - gen.maxTokens);
  const tokenized = await tokenizeInput(ctx.generationPrompts ?? ctx.prompts, input, limit);
  if (!tokenized.complete) {
    throw new ApiError(
      'ERR_CONTEXT_LENGTH',
      `This model's maximum context length is ${ctx.maxModelLen} tokens. However, your request has at least ${tokenized.atLeastTokens} input tokens and asks for ${gen.maxTokens} in the completion. Please reduce the length of the messages or completion.`,
      gen.endpoint === 'chat' ? 'messages' : 'prompt',
    );
  }
  return tokenized.ids;
}

async function generate(
  ctx: HandlerContext,
  endpoint: Endpoint,
  raw: unknown,
  res: ServerResponse,
): Promise<void> {
  const req = readGenerationRequest(endpoint, raw, ctx.prompts.vocabSize);
  const params = readKvTransferParams(asObject(raw));
  const gen = toGeneration(req, ctx.limits);
  if (ctx.output && gen.sampling.logprobs !== null) {
    throw badRequest('logprobs are not served by the llama.cpp runtime', 'logprobs');
  }
  gen.loraName = resolveModel(ctx, req.model);
  const promptTokens = await promptTokensOf(ctx, asObject(raw), gen);
  checkContextLength(promptTokens.length, gen.maxTokens, ctx.maxModelLen);
  const t = ctx.kvTransfer ?? null;
  if (t === null || params.kind === 'none') return serveGeneration(ctx, gen, promptTokens, res);
  if (params.kind === 'prefill') {
    return serveGeneration(
      ctx,
      gen,
      promptTokens,
      res,
      prefillTransfer(t, transferClientOf(t, res.req)),
    );
  }
  if (params.kind === 'incomplete') {
    // vLLM: "Got invalid KVTransferParams ... will not utilize KVTransfer".
    t.failedTransfers++;
    return serveGeneration(ctx, gen, promptTokens, res);
  }
  const transfer = await pullRemote(t, params, promptTokens.length, res);
  if (res.destroyed) return;
  serveGeneration(ctx, gen, promptTokens, res, transfer);
}

export function completions(ctx: HandlerContext, body: unknown, res: ServerResponse) {
  return generate(ctx, 'completions', body, res);
}

export function chatCompletions(ctx: HandlerContext, body: unknown, res: ServerResponse) {
  return generate(ctx, 'chat', body, res);
}

/**
 * vLLM's model list: a card per served name, then one per loaded adapter, whose `root` is its
 * path, `parent` its base model (the first served name unless it was loaded with one) and
 * `max_model_len` null.
 */
export function models(ctx: HandlerContext, res: ServerResponse): void {
  const card = (id: string, root: string, parent: string | null, maxModelLen: number | null) => ({
    id,
    object: 'model',
    created: ctx.createdS,
    owned_by: 'kvroute',
    root,
    parent,
    max_model_len: maxModelLen,
    permission: [],
  });
  sendJson(res, 200, {
    object: 'list',
    data: [
      ...ctx.servedModelNames.map((id) => card(id, ctx.modelName, null, ctx.maxModelLen)),
      ...ctx.adapters
        .list()
        .map((a) => card(a.name, a.path, a.baseModelName ?? ctx.servedModelNames[0]!, null)),
    ],
  });
}

/**
 * vLLM's POST /tokenize: `{prompt, add_special_tokens (true)}` or `{messages,
 * add_generation_prompt (true), continue_final_message, add_special_tokens (false), tools,
 * chat_template_kwargs}`, answered `{count, max_model_len, tokens, token_strs}`. Like vLLM's,
 * it does not check the context window.
 */
export async function tokenize(ctx: HandlerContext, raw: unknown, res: ServerResponse) {
  const body = asObject(raw);
  resolveModel(ctx, optString(body, 'model'));
  let input: PromptInput;
  if (body.messages !== undefined) input = { kind: 'chat', chat: readChatInput(body) };
  else {
    const prompt = optString(body, 'prompt');
    if (prompt === null) throw badRequest("'prompt' or 'messages' is required", 'prompt');
    input = {
      kind: 'completion',
      text: prompt,
      addSpecialTokens: completionAddSpecialTokens(body),
    };
  }
  const tokens = (await tokenizeInput(ctx.prompts, input)).ids;
  sendJson(res, 200, {
    count: tokens.length,
    max_model_len: ctx.maxModelLen,
    tokens,
    token_strs: optBool(body, 'return_token_strs') ? ctx.prompts.text.tokenStrings(tokens) : null,
  });
}

/** vLLM's POST /detokenize: `{tokens}` -> `{prompt}` (special tokens kept). */
export function detokenize(ctx: HandlerContext, raw: unknown, res: ServerResponse): void {
  const body = asObject(raw);
  resolveModel(ctx, optString(body, 'model'));
  const tokens = body.tokens;
  const vocabSize = ctx.prompts.vocabSize;
  if (
    !Array.isArray(tokens) ||
    !tokens.every((t) => Number.isInteger(t) && t >= 0 && t < vocabSize)
  ) {
    throw badRequest(`'tokens' must be a list of token ids in [0, ${vocabSize})`, 'tokens');
  }
  sendJson(res, 200, { prompt: ctx.prompts.text.decode(tokens as number[]) });
}
