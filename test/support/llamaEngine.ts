/** Real llama.cpp engine servers for tests: the tiny model, one thread, a small context. */
import {
  type EngineServerHandle,
  type EngineServerOptions,
  startEngineServer,
} from '../../src/engine/server/server.ts';
import type { LlamaCppServerOptions } from '../../src/engine/runtime/llamaCpp/serve.ts';
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
