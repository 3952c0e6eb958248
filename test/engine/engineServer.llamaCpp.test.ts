/**
 * A real engine: the tiny model on llama.cpp behind the engine server. Its tokenizer is the
 * model file's (Llama 3's ids), a prompt sharing a prefix with an earlier one reuses the KV of
 * the shared blocks (in place, or copied from a running sequence) and says so in cached_tokens,
 * greedy output after reuse is the cold run's, and a sequence overwritten with no other copy
 * takes its blocks out of the cache. At most two engines at once, one thread each.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { EngineServerHandle } from '../../src/engine/server/server.ts';
import { loadPromptTokenizer } from '../../src/tokenizer/promptTokenizer.ts';
import {
  clientFor,
  metric,
  scrape,
  startTestEngine,
  waitFor,
} from '../support/engineServerHelpers.ts';
import { postJson, startLlamaEngine } from '../support/llamaEngine.ts';
import { tinyModelPath } from '../support/tinyModel.ts';
import { LLAMA3_DIR } from '../support/tokenizerFixtures.ts';

const BLOCK = 16;
const BASE =
  'The cache holds every block of the prompt that was computed before, and the router sends ' +
  'a request where the longest prefix of its blocks is cached, so the engine computes only the ' +
  'tail of the prompt and the first token comes sooner than it would on a cold engine. ';

/** The cold reference: a fresh engine that sees each prompt once. */
let cold: EngineServerHandle;

before(async () => {
  cold = await startLlamaEngine({ maxSeqs: 1 });
});

after(async () => {
  await cold?.close();
});

async function tokenize(server: EngineServerHandle, prompt: string): Promise<number[]> {
  const r = await postJson(server, '/tokenize', { prompt, model: server.servedModelName });
  assert.equal(r.status, 200);
  return r.body.tokens;
}

async function greedy(server: EngineServerHandle, prompt: string, maxTokens = 8) {
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

function sharedPrefix(a: readonly number[], b: readonly number[]): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

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

test('a prompt sharing a prefix reports the shared blocks as cached, and greedy output equals a cold run', async () => {
  const warm = await startLlamaEngine({ maxSeqs: 1 });
  try {
    const first = `${BASE}First, the question about blocks.`;
    const second = `${BASE}Second, a different question entirely.`;
    const a = await greedy(warm, first);
    assert.equal(a.cached, 0);
    const b = await greedy(warm, second);
    const shared = sharedPrefix(await tokenize(warm, first), await tokenize(warm, second));
    assert.ok(shared >= 2 * BLOCK, `the prompts share ${shared} tokens`);
    assert.equal(b.cached, Math.floor(shared / BLOCK) * BLOCK);
    const reference = await greedy(cold, second);
    assert.equal(reference.cached, 0);
    assert.equal(b.text, reference.text, 'greedy output after reuse = cold output');
    assert.ok(b.text.length > 0);
    const samples = await scrape(warm);
    assert.equal(metric(samples, 'vllm:prefix_cache_hits_total'), b.cached);
    assert.equal(
      metric(samples, 'vllm:prefix_cache_queries_total'),
      a.promptTokens + b.promptTokens,
    );
    assert.deepEqual(warm.placements?.(), { inPlace: 1, copied: 0, cold: 1, uncached: 0 });
  } finally {
    await warm.close();
  }
});

test('a prefix held by a running sequence is copied by state save and load; the output is the cold one', async () => {
  const warm = await startLlamaEngine({ maxSeqs: 2 }, { cacheSequences: 0 });
  try {
    const long = `${BASE}Keep talking for a while.`;
    const client = clientFor(warm);
    const stream = await client.completions.create({
      model: 'tiny',
      prompt: long,
      max_tokens: 400,
      temperature: 0,
      stream: true,
    });
    const it = stream[Symbol.asyncIterator]();
    await it.next(); // the long request decodes now, its prompt in its sequence
    const second = `${BASE}Then answer this one.`;
    const b = await greedy(warm, second);
    const shared = sharedPrefix(await tokenize(warm, long), await tokenize(warm, second));
    assert.equal(b.cached, Math.floor(shared / BLOCK) * BLOCK);
    assert.equal(warm.placements?.().copied, 1, 'copied from the running sequence');
    const reference = await greedy(cold, second);
    assert.equal(b.text, reference.text);
    stream.controller.abort();
    await waitFor(
      () => warm.counters().running === 0,
      30_000,
      'the aborted stream to free its sequence',
    );
  } finally {
    await warm.close();
  }
});

test('a sequence overwritten with no other copy takes its blocks out of the cache', async () => {
  // One sequence: every new prompt overwrites the last one's KV.
  const warm = await startLlamaEngine({ maxSeqs: 1 }, { cacheSequences: 0 });
  try {
    const first = `${BASE}One.`;
    await greedy(warm, first, 2);
    const blocks = warm.counters();
    assert.ok(blocks.kvBlocksTotal > 0);
    await greedy(
      warm,
      'Something unrelated, long enough to fill a block or two of tokens here.',
      2,
    );
    const again = await greedy(warm, first, 2);
    assert.equal(again.cached, 0, 'the first prompt was recomputed: nothing claimed that was gone');
    assert.equal(warm.placements?.().inPlace, 0);
    assert.ok((warm.placements?.().uncached ?? 0) >= Math.floor(again.promptTokens / BLOCK));
  } finally {
    await warm.close();
  }
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

function runCli(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bin/kvroute.js', 'engine', ...args], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => {
      stderr += d;
    });
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

test('a missing, cut-off or foreign GGUF gets one error line naming the file (exit 2)', async () => {
  const dir = tmpdir();
  const cut = join(dir, `kvroute-cut-${process.pid}.gguf`);
  writeFileSync(cut, Buffer.from('GGUF\x03\x00\x00\x00\x01\x00', 'latin1'));
  const foreign = join(dir, `kvroute-foreign-${process.pid}.gguf`);
  writeFileSync(foreign, 'not a model at all');
  for (const [file, why] of [
    [join(dir, 'kvroute-no-such-model.gguf'), /no such file/],
    [cut, /ends inside its header/],
    [foreign, /not a GGUF file/],
  ] as const) {
    const r = await runCli(['--runtime', 'llama.cpp', '--gguf', file, '--port', '0']);
    assert.equal(r.code, 2, r.stderr);
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 1, r.stderr);
    assert.ok(lines[0]!.includes(`--gguf ${file}`), lines[0]);
    assert.match(lines[0]!, why);
  }
  const none = await runCli(['--runtime', 'llama.cpp', '--port', '0']);
  assert.equal(none.code, 2);
  assert.match(none.stderr, /--runtime llama.cpp needs --gguf FILE/);
  const gguf = await tinyModelPath();
  const sim = await runCli(['--gguf', gguf, '--port', '0']);
  assert.equal(sim.code, 2);
  assert.match(sim.stderr, /--gguf needs --runtime llama.cpp/);
});
