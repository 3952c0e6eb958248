/**
 * The gateway's two ways to a request's token ids. `local` (the default): this process renders
 * and tokenizes with `--tokenizer` / `--chat-template`. `remote` (`--tokenize remote`): a healthy
 * backend's vLLM `POST /tokenize` does it, exact by construction for a template the gateway cannot
 * render, at the price of one round trip. A backend that refuses the prompt (400: its template
 * raised, a field is wrong) answers the client through the gateway; one that cannot be reached
 * or answers otherwise is passed over for the next, and after two tries the gateway falls back to
 * its local tokenizer (counted in `kvroute_gateway_remote_tokenize_fallbacks_total`): routing may
 * then miss the cache, but the request is still served.
 */
import { readSglangTokenizeResponse, sglangTokenizeRequest } from '../engines/sglang/tokenize.ts';
import { ApiError, badRequest } from '../openai/errors.ts';
import { TokenizerError } from '../tokenizer/errors.ts';
import type { PromptTokenizer, Tokenized } from '../tokenizer/promptTokenizer.ts';
import type { Backend } from './backends.ts';
import type { RequestTokenizer, TokenizeQuery } from './request.ts';

export const TOKENIZE_MODES = ['local', 'remote'] as const;
export type TokenizeMode = (typeof TOKENIZE_MODES)[number];

/** Backends asked before falling back to the local tokenizer. */
const REMOTE_TRIES = 2;
const REMOTE_TIMEOUT_MS = 10_000;

export function localTokenizer(prompts: PromptTokenizer): RequestTokenizer {
  return {
    vocabSize: prompts.vocabSize,
    async tokenize(query: TokenizeQuery, limitTokens: number): Promise<Tokenized> {
      try {
        return await prompts.tokenize(query.input, limitTokens);
      } catch (err) {
        if (err instanceof TokenizerError && err.code === 'ERR_TEMPLATE') {
          throw badRequest(err.message, 'messages');
        }
        throw err;
      }
    },
  };
}

export interface RemoteOptions {
  /** The backends taking traffic now. */
  upBackends(): readonly Backend[];
  fallback: RequestTokenizer;
  onFallback(error: Error): void;
}

export function remoteTokenizer(options: RemoteOptions): RequestTokenizer {
  let turn = 0;
  return {
    vocabSize: options.fallback.vocabSize,
    async tokenize(query: TokenizeQuery, limitTokens: number): Promise<Tokenized> {
      const up = options.upBackends();
      let lastError = new Error('no backend is up');
      for (let i = 0; i < Math.min(REMOTE_TRIES, up.length); i++) {
        const backend = up[(turn + i) % up.length]!;
        try {
          const { ids } = await askBackend(backend, query.tokenizeBody);
          turn++;
          return ids.length > limitTokens
            ? { ids, complete: false, atLeastTokens: ids.length }
            : { ids, complete: true, atLeastTokens: ids.length };
        } catch (err) {
          if (err instanceof ApiError) throw err;
          lastError = err as Error;
        }
      }
      turn++;
      options.onFallback(lastError);
      return options.fallback.tokenize(query, limitTokens);
    },
  };
}

/** One backend's /tokenize; a 400 becomes the client's ApiError, other failures plain Errors. */
export async function askBackend(
  backend: Backend,
  body: Record<string, unknown>,
  timeoutMs = REMOTE_TIMEOUT_MS,
): Promise<{ ids: number[]; maxModelLen: number | null }> {
  const sglang = backend.config.engine === 'sglang';
  if (sglang) {
    const asked = sglangTokenizeRequest(body);
    // SGLang's /tokenize is text only: a chat prompt is tokenized by the next backend or locally.
    if (asked === null)
      throw new Error(`${backend.name} (SGLang) /tokenize takes no chat messages`);
    body = asked;
  }
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (backend.config.apiKey) headers.authorization = `Bearer ${backend.config.apiKey}`;
  const { statusCode, body: reply } = await backend.pool.request({
    path: '/tokenize',
    method: 'POST',
    headers,
    body: JSON.stringify(body),
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });
  const json = (await reply.json().catch(() => null)) as {
    tokens?: unknown;
    max_model_len?: unknown;
    error?: { message?: unknown; param?: unknown };
  } | null;
  if (statusCode === 400) {
    const message = json?.error?.message;
    const param = json?.error?.param;
    throw badRequest(
      typeof message === 'string' ? message : 'the backend refused the prompt',
      typeof param === 'string' ? param : null,
    );
  }
  if (sglang && statusCode === 200) {
    const answer = readSglangTokenizeResponse(json);
    if (answer) return answer;
  }
  const tokens = json?.tokens;
  if (statusCode !== 200 || !Array.isArray(tokens) || !tokens.every(Number.isInteger)) {
    throw new Error(
      `${backend.name} /tokenize answered ${statusCode}${statusCode === 200 ? ' without token ids' : ''}`,
    );
  }
  const maxModelLen = json?.max_model_len;
  return {
    ids: tokens as number[],
    maxModelLen: Number.isInteger(maxModelLen) ? (maxModelLen as number) : null,
  };
}
