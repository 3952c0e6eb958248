/**
 * The gateway's two ways to a request's token ids. `local` (the default): this process renders
 * and tokenizes with `--tokenizer` / `--chat-template`. `remote` (`--tokenize remote`): a healthy
 * backend's tokenizer does it, asked in its engine's dialect (`engines/`), exact by construction for a template the gateway cannot
 * render, at the price of one round trip. A backend that refuses the prompt (400: its template
 * raised, a field is wrong) answers the client through the gateway; one that cannot be reached
 * or answers otherwise is passed over for the next, and after two tries the gateway falls back to
 * its local tokenizer (counted in `kvroute_gateway_remote_tokenize_fallbacks_total`): routing may
 * then miss the cache, but the request is still served.
 */
import { ApiError, badRequest } from '../openai/errors.ts';
import { TokenizerError } from '../tokenizer/errors.ts';
import type { PromptTokenizer, Tokenized } from '../tokenizer/promptTokenizer.ts';
import { type Post, TokenizeRefused } from '../engines/dialect.ts';
import { vllm } from '../engines/vllm.ts';
import { type Backend, backendHeaders } from './backends.ts';
import type { RequestTokenizer, TokenizeQuery } from './request.ts';

import { TOKENIZE_MODES, type TokenizeMode } from './configDefaults.ts';

export { TOKENIZE_MODES, type TokenizeMode };

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
      const up = options.upBackends().filter((b) => (b.dialect ?? vllm).tokenizes);
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

/**
 * One backend's tokenizer, asked in its engine's dialect (vLLM's `/tokenize`, llama-server's
 * `/apply-template` + `/tokenize {content}`); a 400 becomes the client's ApiError, other
 * failures plain Errors.
 */
export async function askBackend(
  backend: Backend,
  body: Record<string, unknown>,
  timeoutMs = REMOTE_TIMEOUT_MS,
): Promise<{ ids: number[]; maxModelLen: number | null }> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    ...backendHeaders(backend),
  };
  const post: Post = async (path, payload) => {
    const { statusCode, body: reply } = await backend.pool.request({
      path,
      method: 'POST',
      headers,
      body: JSON.stringify(payload),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    return { status: statusCode, json: await reply.json().catch(() => null) };
  };
  const dialect = backend.dialect ?? vllm;
  try {
    return await dialect.tokenize(body, post);
  } catch (err) {
    if (err instanceof TokenizeRefused) throw badRequest(err.message, err.param);
    throw new Error(`${backend.name} ${(err as Error).message}`);
  }
}
