/**
 * BOS as vLLM adds it: Llama 3 as Meta ships it today (src/gguf/llama3Bos.ts) puts
 * `<|begin_of_text|>` (128000) before a completion's prompt, not before a chat's rendered
 * template (which writes it itself); vLLM's /tokenize defaults `add_special_tokens` to true for
 * `prompt` and false for `messages`. The gateway's tokenizer, the tiny model's metadata and a
 * real llama.cpp engine on that model all agree.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type EngineServerHandle, startEngineServer } from '../../src/engine/server/server.ts';
import { defaultTokenizerDir } from '../../src/gguf/tinyModel.ts';
import { llama3BosFolder } from '../../src/gguf/llama3Bos.ts';
import { tokenizerMetadata } from '../../src/gguf/tokenizerMetadata.ts';
import { loadPromptTokenizer } from '../../src/tokenizer/promptTokenizer.ts';
import { postJson } from '../support/llamaEngine.ts';
import { tinyModelPath } from '../support/tinyModel.ts';
import { LLAMA3_DIR } from '../support/tokenizerFixtures.ts';

const BOS = 128000;
const HELLO = 9906;
const dir = mkdtempSync(join(tmpdir(), 'kvroute-llama3-bos-'));
const folder = llama3BosFolder(LLAMA3_DIR, dir);
const messages = [
  { role: 'system' as const, content: 'Be brief.' },
  { role: 'user' as const, content: 'Hello' },
];

after(() => rmSync(dir, { recursive: true, force: true }));

const addBos = (path: string) =>
  tokenizerMetadata(path).kvs.find(([key]) => key === 'tokenizer.ggml.add_bos_token')?.[1];

describe('the tokenizer folder', () => {
  test('a completion gets BOS with special tokens, none without; a chat one BOS, as before', () => {
    const withBos = loadPromptTokenizer({ tokenizer: folder, chatTemplate: null });
    const aprilFile = loadPromptTokenizer({ tokenizer: LLAMA3_DIR, chatTemplate: null });
    assert.deepEqual(withBos.encodePrompt('Hello'), [BOS, HELLO]);
    assert.deepEqual(withBos.encodePrompt('Hello', false), [HELLO]);
    assert.deepEqual(aprilFile.encodePrompt('Hello'), [HELLO], "the package's April 2024 file");
    const chat = withBos.encodeChat(messages);
    assert.deepEqual(chat, aprilFile.encodeChat(messages));
    assert.equal(chat[0], BOS);
    assert.notEqual(chat[1], BOS, 'one BOS: the template writes it, special tokens are not added');
  });

  test("the tiny model's metadata says add_bos_token where the post-processor adds it", () => {
    assert.deepEqual(addBos(folder), addBos(defaultTokenizerDir()));
    assert.notDeepEqual(addBos(folder), addBos(LLAMA3_DIR));
  });

  test('written once: a second call returns the same folder', () => {
    assert.equal(llama3BosFolder(LLAMA3_DIR, dir), folder);
  });
});

describe('a real engine on the tiny model written from it', () => {
  let engine: EngineServerHandle;
  before(async () => {
    const gguf = await tinyModelPath({ tokenizer: folder });
    engine = await startEngineServer({
      host: '127.0.0.1',
      port: 0,
      runtime: 'llama.cpp',
      maxModelLen: 512,
      budgetTokens: 128,
      blockSize: 16,
      servedModelName: 'tiny',
      llamaCpp: { gguf, threads: 1 },
    });
  });
  after(async () => {
    await engine?.close();
  });

  test('/tokenize: BOS for a prompt (add_special_tokens defaults to true), not when told false', async () => {
    const r = await postJson(engine, '/tokenize', { prompt: 'Hello', model: 'tiny' });
    assert.equal(r.status, 200);
    assert.deepEqual(r.body.tokens, [BOS, HELLO]);
    const off = await postJson(engine, '/tokenize', {
      prompt: 'Hello',
      model: 'tiny',
      add_special_tokens: false,
    });
    assert.deepEqual(off.body.tokens, [HELLO]);
  });

  test("/tokenize: a chat's ids are the template's, with one BOS", async () => {
    const r = await postJson(engine, '/tokenize', { messages, model: 'tiny' });
    assert.equal(r.status, 200);
    const hf = loadPromptTokenizer({ tokenizer: folder, chatTemplate: null });
    assert.deepEqual(r.body.tokens, hf.encodeChat(messages));
  });

  test("a completion's prompt_tokens count BOS, as vLLM's do", async () => {
    const res = await fetch(`${engine.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny', prompt: 'Hello', max_tokens: 1 }),
    });
    assert.equal(res.status, 200);
    const body = (await res.json()) as { usage: { prompt_tokens: number } };
    assert.equal(body.usage.prompt_tokens, 2);
  });
});
