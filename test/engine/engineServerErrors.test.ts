import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import type { EngineServerHandle } from '../../src/engine/server/server.ts';
import { clientFor, startTestEngine } from '../support/engineServerHelpers.ts';

let server: EngineServerHandle;

before(async () => {
  // A small KV pool (32 blocks = 512 tokens) and a small context window make every limit cheap.
  server = await startTestEngine({
    servedModelName: 'my-llama',
    maxModelLen: 1024,
    kvBlocks: 32,
    bodyLimitBytes: 64 * 1024,
  });
});

after(async () => {
  await server.close();
});

interface ErrorBody {
  error: { message: string; type: string; code: number; param: string | null };
}

async function call(
  path: string,
  init: { method?: string; body?: string | object } = {},
): Promise<{ status: number; body: ErrorBody; headers: Headers }> {
  const body = typeof init.body === 'object' ? JSON.stringify(init.body) : init.body;
  const res = await fetch(`${server.url}${path}`, {
    method: init.method ?? (body === undefined ? 'GET' : 'POST'),
    ...(body !== undefined && { body }),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null, headers: res.headers };
}

function assertError(r: { status: number; body: ErrorBody }, status: number, type: string) {
  assert.equal(r.status, status, JSON.stringify(r.body));
  assert.equal(r.body.error.code, status);
  assert.equal(r.body.error.type, type);
  assert.equal(typeof r.body.error.message, 'string');
}

const ok = { model: 'my-llama', prompt: 'hi', max_tokens: 2 };

test('400 for malformed JSON and for missing or mistyped fields', async () => {
  assertError(await call('/v1/completions', { body: '{"prompt": ' }), 400, 'BadRequestError');
  assertError(await call('/v1/completions', { body: '[1, 2]' }), 400, 'BadRequestError');
  const cases: [string, object, string][] = [
    ['/v1/completions', { model: 'my-llama' }, 'prompt'],
    ['/v1/completions', { ...ok, prompt: 42 }, 'prompt'],
    ['/v1/completions', { ...ok, prompt: '' }, 'prompt'],
    ['/v1/completions', { ...ok, prompt: [1, -2] }, 'prompt'],
    ['/v1/completions', { ...ok, prompt: ['a', 'b'] }, 'prompt'],
    ['/v1/completions', { ...ok, max_tokens: '5' }, 'max_tokens'],
    ['/v1/completions', { ...ok, max_tokens: 2.5 }, 'max_tokens'],
    ['/v1/completions', { ...ok, max_tokens: 0 }, 'max_tokens'],
    ['/v1/completions', { ...ok, stream: 'yes' }, 'stream'],
    ['/v1/completions', { ...ok, n: 0 }, 'n'],
    ['/v1/completions', { ...ok, min_tokens: 3 }, 'min_tokens'],
    ['/v1/completions', { ...ok, logprobs: 21 }, 'logprobs'],
    ['/v1/completions', { ...ok, cache_salt: 7 }, 'cache_salt'],
    ['/v1/chat/completions', { model: 'my-llama' }, 'messages'],
    ['/v1/chat/completions', { model: 'my-llama', messages: [{ content: 'x' }] }, 'messages'],
    [
      '/v1/chat/completions',
      { messages: [{ role: 'user', content: 'x' }], max_tokens: -1 },
      'max_tokens',
    ],
  ];
  for (const [path, body, param] of cases) {
    const r = await call(path, { body });
    assertError(r, 400, 'BadRequestError');
    assert.equal(r.body.error.param, param, JSON.stringify(body));
  }
});

test('400 when prompt + max_tokens exceed max_model_len, naming both numbers', async () => {
  const prompt = Array.from({ length: 1000 }, (_, i) => i + 10);
  const r = await call('/v1/completions', { body: { ...ok, prompt, max_tokens: 100 } });
  assertError(r, 400, 'BadRequestError');
  assert.match(r.body.error.message, /1024/);
  assert.match(r.body.error.message, /1100/);
});

test('400 (never a hang) for a request that can never fit the KV pool', async () => {
  const prompt = Array.from({ length: 700 }, (_, i) => i + 10);
  const promptTokensBefore = server.counters().promptTokens;
  const r = await call('/v1/completions', { body: { ...ok, prompt, max_tokens: 10 } });
  assertError(r, 400, 'BadRequestError');
  // Refused before the scheduler saw it (it would wait there for ever): no prompt token
  // scheduled, nothing queued.
  const c = server.counters();
  assert.equal(c.promptTokens, promptTokensBefore, 'no prompt token of it was ever computed');
  assert.equal(c.running + c.waiting, 0, 'nothing left queued');
});

test('404 for an unknown model (the served name is accepted) and unknown routes', async () => {
  const wrong = await call('/v1/completions', { body: { ...ok, model: 'llama-3.3-70b' } });
  assertError(wrong, 404, 'NotFoundError');
  assert.match(wrong.body.error.message, /llama-3\.3-70b/);
  const chat = await call('/v1/chat/completions', {
    body: { model: 'gpt-4', messages: [{ role: 'user', content: 'x' }] },
  });
  assertError(chat, 404, 'NotFoundError');
  assertError(await call('/v1/nothing-here'), 404, 'NotFoundError');
  assertError(await call('/v2/completions', { body: ok }), 404, 'NotFoundError');
});

test('405 for wrong methods, with Allow', async () => {
  const get = await call('/v1/completions');
  assertError(get, 405, 'MethodNotAllowedError');
  assert.equal(get.headers.get('allow'), 'POST');
  const post = await call('/v1/models', { body: {} });
  assertError(post, 405, 'MethodNotAllowedError');
  assert.equal(post.headers.get('allow'), 'GET');
});

test('413 for a body over the limit', async () => {
  const prompt = 'x'.repeat(100 * 1024);
  const r = await call('/v1/completions', { body: { ...ok, prompt } });
  assertError(r, 413, 'RequestEntityTooLargeError');
});

test('the openai client sees typed errors; the server keeps serving', async () => {
  const client = clientFor(server);
  await assert.rejects(
    client.completions.create({ model: 'my-llama', prompt: 'x', max_tokens: 0 }),
    (err: unknown) => err instanceof OpenAI.BadRequestError && err.status === 400,
  );
  await assert.rejects(
    client.completions.create({ model: 'other', prompt: 'x', max_tokens: 1 }),
    (err: unknown) => err instanceof OpenAI.NotFoundError,
  );
  const res = await client.completions.create({ model: 'my-llama', prompt: 'x', max_tokens: 3 });
  assert.equal(res.usage?.completion_tokens, 3);
  const tok = await call('/tokenize', { body: { model: 'my-llama', prompt: 'Hello world' } });
  assert.equal(tok.status, 200);
  assert.deepEqual(tok.body, {
    count: 2,
    max_model_len: 1024,
    tokens: [9906, 1917],
    token_strs: null,
  });
});
