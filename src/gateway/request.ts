/**
 * One OpenAI request, from raw body bytes to what the router needs: validated fields, prompt
 * token ids (rendered and tokenized exactly as the engine will), block keys salted per tenant,
 * and the body to forward. Everything here fails with a 400-class GatewayError before any
 * upstream call is made.
 */
import type { IncomingMessage } from 'node:http';
import { type BlockKey, computeBlockKeys } from '../kv/blockKey.ts';
import { parseChatMessages } from '../tokenizer/chatMessages.ts';
import { GatewayError } from './errors.ts';
import type { PromptTokenizer } from './tokenize.ts';

export type Endpoint = 'completions' | 'chat';

export interface ParsedRequest {
  endpoint: Endpoint;
  model: string | null;
  stream: boolean;
  promptTokens: number;
  blockKeys: BlockKey[];
  /** Salt folded into the first block (tenant salt and request cache_salt combined). */
  cacheSalt: string | null;
  /** Bytes to send upstream: the client's own unless a tenant salt had to be written in. */
  body: Buffer;
}

/** Reads the body, refusing past `limitBytes` without buffering the rest (413). */
export function readBody(req: IncomingMessage, limitBytes: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limitBytes) {
    req.resume();
    return Promise.reject(tooLarge(limitBytes));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limitBytes) {
        req.off('data', onData);
        req.resume();
        reject(tooLarge(limitBytes));
        return;
      }
      chunks.push(chunk);
    };
    req.on('data', onData);
    req.once('end', () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)));
    req.once('error', reject);
    req.once('close', () => {
      if (!req.complete)
        reject(new GatewayError('ERR_CLIENT_TIMEOUT', 'client closed before the body ended'));
    });
  });
}

const tooLarge = (limitBytes: number): GatewayError =>
  new GatewayError('ERR_BODY_TOO_LARGE', `request body is larger than ${limitBytes} bytes`);

const bad = (message: string, param?: string): GatewayError =>
  new GatewayError('ERR_INVALID_REQUEST', message, param === undefined ? undefined : { param });

export interface ParseContext {
  tokenizer: PromptTokenizer;
  blockSize: number;
  /** The caller's tenant salt, or null. */
  tenantSalt: string | null;
}

export function parseRequest(endpoint: Endpoint, raw: Buffer, ctx: ParseContext): ParsedRequest {
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw new GatewayError(
      'ERR_BAD_JSON',
      `request body is not valid JSON: ${(err as Error).message}`,
    );
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw bad('request body must be a JSON object');
  }
  const model = optString(body, 'model');
  const stream = optBool(body, 'stream') ?? false;
  const requestSalt = optString(body, 'cache_salt');
  if (requestSalt === '') throw bad("'cache_salt' must be a non-empty string", 'cache_salt');
  for (const field of ['max_tokens', 'max_completion_tokens'] as const) {
    const v = body[field];
    if (v !== undefined && v !== null && (!Number.isSafeInteger(v) || (v as number) < 1)) {
      throw bad(`'${field}' must be a positive integer`, field);
    }
  }

  const tokens =
    endpoint === 'completions'
      ? promptTokens(body.prompt, ctx.tokenizer)
      : ctx.tokenizer.encodeChat(parseChatMessages(body.messages, bad));

  // A tenant's salt always applies, so no request can reach another tenant's entries; a request
  // salt then subdivides within the tenant. The engine must see the same salt to key the same.
  let cacheSalt = requestSalt;
  let forward = raw;
  if (ctx.tenantSalt !== null) {
    cacheSalt = requestSalt === null ? ctx.tenantSalt : `${ctx.tenantSalt}/${requestSalt}`;
    forward = Buffer.from(JSON.stringify({ ...body, cache_salt: cacheSalt }));
  }
  const blockKeys = computeBlockKeys(tokens, ctx.blockSize, {
    cacheSalt: cacheSalt ?? undefined,
  });
  return {
    endpoint,
    model,
    stream,
    promptTokens: tokens.length,
    blockKeys,
    cacheSalt,
    body: forward,
  };
}

function promptTokens(raw: unknown, tokenizer: PromptTokenizer): number[] {
  if (raw === undefined || raw === null) throw bad("'prompt' is required", 'prompt');
  // A one-element batch is the same request (the engine reads it the same way).
  if (Array.isArray(raw) && raw.length === 1 && !isTokenIds(raw)) raw = raw[0];
  if (typeof raw === 'string') {
    if (raw.length === 0) throw bad('prompt cannot be empty', 'prompt');
    return tokenizer.encodePrompt(raw);
  }
  if (isTokenIds(raw)) {
    for (const t of raw) {
      if (!Number.isInteger(t) || t < 0 || t >= tokenizer.vocabSize) {
        throw bad(`token id ${t} is out of vocabulary [0, ${tokenizer.vocabSize})`, 'prompt');
      }
    }
    return raw;
  }
  if (Array.isArray(raw) && raw.length > 1) {
    // Batched prompts go upstream as sent; routing uses the first, which shares the batch's fate.
    return promptTokens(raw[0], tokenizer);
  }
  throw bad("'prompt' must be a string, a list of strings or a list of token ids", 'prompt');
}

function isTokenIds(v: unknown): v is number[] {
  return Array.isArray(v) && v.length > 0 && v.every((t) => typeof t === 'number');
}

function optString(body: Record<string, unknown>, field: string): string | null {
  const v = body[field];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'string') throw bad(`'${field}' must be a string`, field);
  return v;
}

function optBool(body: Record<string, unknown>, field: string): boolean | null {
  const v = body[field];
  if (v === undefined || v === null) return null;
  if (typeof v !== 'boolean') throw bad(`'${field}' must be a boolean`, field);
  return v;
}
