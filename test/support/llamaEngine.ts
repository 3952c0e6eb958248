/** Real llama.cpp engine servers for tests: the tiny model, one thread, a small context. */
import assert from 'node:assert/strict';
import {
  type EngineServerHandle,
  type EngineServerOptions,
  startEngineServer,
} from '../../src/engine/server/server.ts';
import type { LlamaCppServerOptions } from '../../src/engine/runtime/llamaCpp/serve.ts';
import { clientFor } from './engineServerHelpers.ts';
import { tinyModelPath } from './tinyModel.ts';

export const TEST_CONTEXT_TOKENS = 1024;

/** A llama.cpp engine on 127.0.0.1 port 0 serving the default tiny model. */
export async function startLlamaEngine(
  options: EngineServerOptions = {},
  llamaCpp: Partial<LlamaCppServerOptions> = {},
): Promise<EngineServerHandle> {
  const gguf = await tinyModelPath();
  return startEngineServer({
    host: '127.0.0.1',
    port: 0,
    runtime: 'llama.cpp',
    maxModelLen: TEST_CONTEXT_TOKENS,
    budgetTokens: 128,
    blockSize: 16,
    servedModelName: 'tiny',
    ...options,
    llamaCpp: { gguf, threads: 1, ...llamaCpp },
  });
}

/** The fields the tests read from an answer (a success or vLLM's error body). */
export interface Answer {
  tokens: number[];
  error: { type: string; param: string | null; message: string; code: number };
}

/** POST a JSON body; the status and the parsed answer. */
export async function postJson(
  server: EngineServerHandle,
  path: string,
  body: unknown,
): Promise<{ status: number; body: Answer }> {
  const res = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

/** A prompt start the cache tests share (several blocks of 16 tokens). */
export const BASE_PROMPT =
  'The cache holds every block of the prompt that was computed before, and the router sends ' +
  'a request where the longest prefix of its blocks is cached, so the engine computes only the ' +
  'tail of the prompt and the first token comes sooner than it would on a cold engine. ';

/** The engine's token ids for a completion prompt (POST /tokenize). */
export async function tokenize(server: EngineServerHandle, prompt: string): Promise<number[]> {
  const r = await postJson(server, '/tokenize', { prompt, model: server.servedModelName });
  assert.equal(r.status, 200);
  return r.body.tokens;
}

/** A greedy completion: its text, cached prompt tokens and prompt tokens. */
export async function greedy(server: EngineServerHandle, prompt: string, maxTokens = 8) {
  const res = await clientFor(server).completions.create({
    model: server.servedModelName,
    prompt,
    max_tokens: maxTokens,
    temperature: 0,
  });
  return {
    text: res.choices[0]!.text,
    cached: res.usage!.prompt_tokens_details?.cached_tokens ?? 0,
    promptTokens: res.usage!.prompt_tokens,
  };
}

/** How many leading ids two token lists share. */
export function sharedPrefix(a: readonly number[], b: readonly number[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}
