/**
 * A real engine: the tiny model on llama.cpp behind the engine server. Its tokenizer is the
 * model file's (Llama 3's ids), a client that disconnects frees its sequence, and bad input gets
 * the sim engine's answers. One engine, one thread. The other parts: engineServer.llamaCpp.*.test.ts; the shared prompt and
 * helpers: test/support/llamaEngine.ts.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { EngineServerHandle } from '../../src/engine/server/server.ts';
import { loadPromptTokenizer } from '../../src/tokenizer/promptTokenizer.ts';
import { startTestEngine, waitFor } from '../support/engineServerHelpers.ts';
import {
  BASE_PROMPT as BASE,
  greedy,
  postJson,
  startLlamaEngine,
  tokenize,
} from '../support/llamaEngine.ts';
import { LLAMA3_DIR } from '../support/tokenizerFixtures.ts';

/** The cold reference: a fresh engine that sees each prompt once. */
let cold: EngineServerHandle;

before(async () => {
  cold = await startLlamaEngine({ maxSeqs: 1 });
});

after(async () => {
  await cold?.close();
});

test("/tokenize gives Llama 3's ids from the model file, as the gateway's tokenizer does", async () => {
  // Llama 3's ids for these words (tiktoken-based vocabulary, no BOS for a completion with
  // Meta's April 2024 tokenizer.json, as vLLM given that file).
  assert.deepEqual(await tokenize(cold, 'Hello world'), [9906, 1917]);
  const hf = loadPromptTokenizer({ tokenizer: LLAMA3_DIR, chatTemplate: null });
  const text = `${BASE}<|begin_of_text|>naïve café 東京 123456 \n\n  x`;
  assert.deepEqual(await tokenize(cold, text), hf.encodePrompt(text));
  const messages = [
    { role: 'system' as const, content: 'Be brief.' },
    { role: 'user' as const, content: BASE },
  ];
  const chat = await postJson(cold, '/tokenize', { messages, model: 'tiny' });
  assert.equal(chat.status, 200);
  assert.deepEqual(chat.body.tokens, hf.encodeChat(messages));
  assert.equal(chat.body.tokens[0], 128000, 'the chat template writes BOS');
});

test('a client that disconnects frees its sequence for the next request', async () => {
  const controller = new AbortController();
  const res = await fetch(`${cold.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'tiny', prompt: BASE, max_tokens: 500, stream: true }),
    signal: controller.signal,
  });
  const reader = res.body!.getReader();
  await reader.read();
  controller.abort();
  await waitFor(() => cold.counters().running === 0, 30_000, 'the sequence to be freed');
  // One sequence only: this runs only because the disconnected one let go of it.
  const next = await greedy(cold, 'After the disconnect.', 3);
  assert.ok(next.promptTokens > 0);
});

test('bad input gets the sim engine’s answers', async () => {
  const sim = await startTestEngine({ servedModelName: 'tiny', maxModelLen: 1024 });
  try {
    const cases: [string, unknown][] = [
      ['unknown model', { model: 'nope', prompt: 'hi', max_tokens: 2 }],
      ['past the context', { model: 'tiny', prompt: 'hi', max_tokens: 5000 }],
      ['max_tokens 0', { model: 'tiny', prompt: 'hi', max_tokens: 0 }],
      ['greedy n=2', { model: 'tiny', prompt: 'hi', max_tokens: 2, n: 2, temperature: 0 }],
      ['no prompt', { model: 'tiny', max_tokens: 2 }],
      ['token ids out of the vocabulary', { model: 'tiny', prompt: [1, 999999999], max_tokens: 2 }],
    ];
    for (const [what, body] of cases) {
      const real = await postJson(cold, '/v1/completions', body);
      const simulated = await postJson(sim, '/v1/completions', body);
      assert.equal(real.status, simulated.status, what);
      assert.ok(real.status === 400 || real.status === 404, `${what}: ${real.status}`);
      assert.equal(real.body.error.type, simulated.body.error.type, what);
      assert.equal(real.body.error.param, simulated.body.error.param, what);
    }
    const logprobs = await postJson(cold, '/v1/completions', {
      model: 'tiny',
      prompt: 'hi',
      logprobs: 2,
    });
    assert.equal(logprobs.status, 400);
    assert.equal(logprobs.body.error.param, 'logprobs');
  } finally {
    await sim.close();
  }
});
