/**
 * One OpenAI request, from raw body bytes to what the router needs: the fields read by the shared
 * reader (`src/openai/request.ts`), prompt token ids (rendered and tokenized exactly as the engine
 * will), block keys salted per tenant, and the body to forward. Everything here fails with a
 * 400 ApiError before any upstream call is made.
 */
import { type BlockKey, computeBlockKeys } from '../kv/blockKey.ts';
import { parseJson } from '../openai/http.ts';
import { tenantCacheSalt, withCacheSalt } from './cacheSalt.ts';
import { type Endpoint, type PromptInput, readGenerationRequest } from '../openai/request.ts';
import type { PromptTokenizer } from '../tokenizer/promptTokenizer.ts';

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

export interface ParseContext {
  tokenizer: PromptTokenizer;
  blockSize: number;
  /** The caller's tenant salt, or null. */
  tenantSalt: string | null;
}

export function parseRequest(endpoint: Endpoint, raw: Buffer, ctx: ParseContext): ParsedRequest {
  const body = parseJson(raw);
  const req = readGenerationRequest(endpoint, body, ctx.tokenizer.vocabSize);
  // A batch goes upstream as sent; routing uses its first prompt, which shares the batch's fate.
  const tokens =
    req.endpoint === 'completions'
      ? promptTokens(req.prompts[0]!, ctx.tokenizer)
      : ctx.tokenizer.encodeChat(req.messages);

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

function promptTokens(prompt: PromptInput, tokenizer: PromptTokenizer): number[] {
  return 'text' in prompt ? tokenizer.encodePrompt(prompt.text) : prompt.tokenIds;
}
