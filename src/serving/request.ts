/**
 * One OpenAI request, from raw body bytes to what the router needs: the fields read by the shared
 * reader (`src/openai/request.ts`), prompt token ids (rendered and tokenized exactly as the backend
 * will: locally, or by a backend's /tokenize with `--tokenize remote`), block keys salted per
 * tenant, and the body to forward. Everything here fails with a 400 ApiError before any upstream
 * call is made (a field only the gateway writes, `clientFields.ts`, among them); a prompt longer than every backend's context window is refused after counting
 * just past that window, never tokenized whole.
 */
import { type BlockKey, computeBlockKeys } from '../kv/blockKey.ts';
import { ApiError } from '../openai/errors.ts';
import type { Body } from '../openai/fields.ts';
import { parseJson } from '../openai/http.ts';
import { tenantCacheSalt, withCacheSalt } from './cacheSalt.ts';
import { refuseGatewayOnlyFields } from './clientFields.ts';
import { type Endpoint, readGenerationRequest } from '../openai/request.ts';
import { completionAddSpecialTokens, readChatInput } from '../openai/templateFields.ts';
import type { PromptInput, Tokenized } from '../tokenizer/promptTokenizer.ts';

export interface ParsedRequest {
  endpoint: Endpoint;
  model: string | null;
  stream: boolean;
  promptTokens: number;
  blockKeys: BlockKey[];
  /** Salt folded into the first block (tenant salt and request cache_salt combined). */
  cacheSalt: string | null;
  /** The client's `priority` (vLLM's), null when absent. */
  priority: number | null;
  /** Bytes to send upstream: the client's own unless a tenant salt had to be written in. */
  body: Buffer;
}

/** A prompt to tokenize: for this process, and as a vLLM /tokenize body for a backend. */
export interface TokenizeQuery {
  input: PromptInput;
  tokenizeBody: Record<string, unknown>;
}

/** Turns a request's prompt into ids (locally, or by asking a backend). */
export interface RequestTokenizer {
  readonly vocabSize: number;
  /** Stops past `limitTokens`; throws ApiError 400 when the prompt cannot be rendered. */
  tokenize(query: TokenizeQuery, limitTokens: number): Promise<Tokenized>;
}

export interface ParseContext {
  tokenizer: RequestTokenizer;
  blockSize: number;
  /** The caller's tenant salt, or null. */
  tenantSalt: string | null;
  /** The largest context window among the backends (Infinity while none is known). */
  maxModelLen: number;
  /** The LoRA adapter the request names: its blocks are keyed apart from the base model's. */
  loraName?: string | null;
  /** The body already parsed from `raw` (the gateway reads `model` first to pick a pool). */
  json?: unknown;
}

/** The request fields a backend's /tokenize reads, as the client sent them. */
const CHAT_TOKENIZE_FIELDS = [
  'model',
  'messages',
  'add_generation_prompt',
  'continue_final_message',
  'add_special_tokens',
  'chat_template_kwargs',
  'tools',
];

export async function parseRequest(
  endpoint: Endpoint,
  raw: Buffer,
  ctx: ParseContext,
): Promise<ParsedRequest> {
  const body = (ctx.json === undefined ? parseJson(raw) : ctx.json) as Body;
  refuseGatewayOnlyFields(body);
  const req = readGenerationRequest(endpoint, body, ctx.tokenizer.vocabSize);
  // A batch goes upstream as sent; routing uses its first prompt, which shares the batch's fate.
  const first = req.endpoint === 'completions' ? req.prompts[0]! : null;
  let tokens: number[];
  if (first !== null && 'tokenIds' in first) tokens = first.tokenIds;
  else {
    // The /tokenize body is built only when a backend is asked (`--tokenize remote`).
    const query: TokenizeQuery =
      first !== null
        ? {
            input: {
              kind: 'completion',
              text: first.text,
              addSpecialTokens: completionAddSpecialTokens(body),
            },
            get tokenizeBody() {
              return pick(body, ['model', 'add_special_tokens'], { prompt: first.text });
            },
          }
        : {
            input: { kind: 'chat', chat: readChatInput(body) },
            get tokenizeBody() {
              return pick(body, CHAT_TOKENIZE_FIELDS);
            },
          };
    const tokenized = await ctx.tokenizer.tokenize(query, ctx.maxModelLen);
    if (!tokenized.complete) {
      throw new ApiError(
        'ERR_CONTEXT_LENGTH',
        `This model's maximum context length is ${ctx.maxModelLen} tokens. However, your request has at least ${tokenized.atLeastTokens} input tokens. Please reduce the length of the input messages.`,
        first !== null ? 'prompt' : 'messages',
      );
    }
    tokens = tokenized.ids;
  }

  // A tenant's salt always applies, so no request can reach another tenant's entries; a request
  // salt then subdivides within the tenant. The engine must see the same salt to key the same.
  let cacheSalt = req.cacheSalt;
  let forward = raw;
  if (ctx.tenantSalt !== null) {
    cacheSalt = tenantCacheSalt(ctx.tenantSalt, cacheSalt);
    forward = withCacheSalt(raw, cacheSalt);
  }
  const blockKeys = computeBlockKeys(tokens, ctx.blockSize, {
    cacheSalt: cacheSalt ?? undefined,
    loraName: ctx.loraName ?? undefined,
  });
  return {
    endpoint,
    model: req.model,
    stream: req.stream,
    promptTokens: tokens.length,
    blockKeys,
    cacheSalt,
    priority: req.priority,
    body: forward,
  };
}

function pick(
  body: Body,
  fields: readonly string[],
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of fields) if (body[f] !== undefined) out[f] = body[f];
  return { ...out, ...extra };
}
