/**
 * The OpenAI-compatible endpoints vLLM serves, as plain functions of (context, body, response).
 * They throw ApiError (or the core's EngineError); the server turns those into error bodies.
 */
import type { ServerResponse } from 'node:http';
import { ApiError, badRequest } from '../../openai/errors.ts';
import { sendJson } from '../../openai/http.ts';
import { type Endpoint, readGenerationRequest } from '../../openai/request.ts';
import { encodeChat } from '../../tokenizer/chatTemplate.ts';
import type { AdapterRegistry } from './adapters.ts';
import { type GenerationContext, serveGeneration } from './generate.ts';
import {
  checkContextLength,
  type Generation,
  parseTokenizeBody,
  toGeneration,
} from './validation.ts';

export interface HandlerContext extends GenerationContext {
  modelName: string;
  /** Every name the model answers to (vLLM's --served-model-name list), the response's first. */
  servedModelNames: readonly string[];
  maxModelLen: number;
  createdS: number;
  /** LoRA adapters loaded (empty when LoRA is off). */
  adapters: AdapterRegistry;
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

function promptTokensOf(ctx: HandlerContext, gen: Generation): number[] {
  if (gen.messages) return encodeChat(ctx.tokenizer, gen.messages);
  const prompt = gen.prompt!;
  return 'text' in prompt ? ctx.tokenizer.encode(prompt.text) : prompt.tokenIds;
}

function generate(
  ctx: HandlerContext,
  endpoint: Endpoint,
  body: unknown,
  res: ServerResponse,
): void {
  const req = readGenerationRequest(endpoint, body, ctx.tokenizer.vocabSize);
  const gen = toGeneration(req, ctx.limits);
  gen.loraName = resolveModel(ctx, req.model);
  const promptTokens = promptTokensOf(ctx, gen);
  checkContextLength(promptTokens.length, gen.maxTokens, ctx.maxModelLen);
  serveGeneration(ctx, gen, promptTokens, res);
}

export function completions(ctx: HandlerContext, body: unknown, res: ServerResponse): void {
  generate(ctx, 'completions', body, res);
}

export function chatCompletions(ctx: HandlerContext, body: unknown, res: ServerResponse): void {
  generate(ctx, 'chat', body, res);
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

export function tokenize(ctx: HandlerContext, body: unknown, res: ServerResponse): void {
  const parsed = parseTokenizeBody(body);
  resolveModel(ctx, parsed.model);
  const tokens =
    parsed.messages !== null
      ? encodeChat(ctx.tokenizer, parsed.messages, parsed.addGenerationPrompt)
      : ctx.tokenizer.encode(parsed.prompt);
  sendJson(res, 200, {
    count: tokens.length,
    max_model_len: ctx.maxModelLen,
    tokens,
    token_strs: null,
  });
}

export function detokenize(ctx: HandlerContext, body: unknown, res: ServerResponse): void {
  const tokens = (body as { tokens?: unknown } | null)?.tokens;
  if (
    !Array.isArray(tokens) ||
    !tokens.every((t) => Number.isInteger(t) && t >= 0 && t < ctx.tokenizer.vocabSize)
  ) {
    throw badRequest("'tokens' must be a list of token ids", 'tokens');
  }
  sendJson(res, 200, { prompt: ctx.tokenizer.decode(tokens) });
}
