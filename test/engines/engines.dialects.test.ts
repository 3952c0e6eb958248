/**
 * Each engine dialect against fixtures written from its upstream source: llama.cpp's
 * tools/server (metrics text, `/props`, `/slots`, `/tokenize`, `/apply-template`), vLLM's
 * v1 metrics loggers, SGLang's scheduler metrics collector; and detection from what a backend
 * serves.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import type { Post } from '../../src/engines/dialect.ts';
import { detectKind } from '../../src/engines/detect.ts';
import {
  llamaTokenize,
  parseLlamaLoad,
  parseLlamaProps,
  parseLlamaSlots,
} from '../../src/engines/llamacpp.ts';
import { dialectOf } from '../../src/engines/registry.ts';
import { parseSglangLoad } from '../../src/engines/sglang.ts';
import { parseVllmLoad } from '../../src/engines/vllm.ts';

const fixture = (name: string) =>
  readFileSync(new URL(`../fixtures/engines/${name}`, import.meta.url), 'utf8');

test('llama.cpp metrics: requests_processing running, requests_deferred waiting, busy slots as usage', () => {
  const text = fixture('llamacpp.metrics.txt');
  assert.deepEqual(parseLlamaLoad(text, 4), { kvUsage: 0.75, running: 3, waiting: 2 });
  assert.deepEqual(parseLlamaLoad(text), { kvUsage: 0, running: 3, waiting: 2 });
  assert.equal(parseLlamaLoad(fixture('vllm.metrics.txt')), null);
});

test('llama.cpp /props and /slots', () => {
  const props = parseLlamaProps(JSON.parse(fixture('llamacpp.props.json')));
  assert.deepEqual(props, { slots: 4, slotContextTokens: 4096, modelPath: '/tmp/tiny.gguf' });
  assert.equal(parseLlamaProps({ data: [] }), null);
  assert.deepEqual(parseLlamaSlots(JSON.parse(fixture('llamacpp.slots.json'))), {
    kvUsage: 0.5,
    running: 2,
    waiting: 0,
  });
  assert.equal(parseLlamaSlots({ error: 'slots disabled' }), null);
});

test('vLLM and SGLang metrics', () => {
  assert.deepEqual(parseVllmLoad(fixture('vllm.metrics.txt')), {
    kvUsage: 0.5,
    running: 3,
    waiting: 4,
  });
  assert.deepEqual(parseSglangLoad(fixture('sglang.metrics.txt')), {
    kvUsage: 0.42,
    running: 7,
    waiting: 3,
  });
  assert.equal(parseSglangLoad(fixture('llamacpp.metrics.txt')), null);
});

/** A recording `post` answering as llama-server does. */
function llamaPost(calls: { path: string; body: Record<string, unknown> }[]): Post {
  return async (path, body) => {
    calls.push({ path, body });
    if (path === '/apply-template') return { status: 200, json: { prompt: '<chat>hi</chat>' } };
    if (path === '/tokenize') return { status: 200, json: { tokens: [1, 2, 3] } };
    return { status: 404, json: null };
  };
}

test('llama.cpp tokenize: content with add_special; a chat rendered by /apply-template first', async () => {
  const calls: { path: string; body: Record<string, unknown> }[] = [];
  const plain = await llamaTokenize({ prompt: 'hello' }, llamaPost(calls));
  assert.deepEqual(plain, { ids: [1, 2, 3], maxModelLen: null });
  assert.deepEqual(calls, [
    { path: '/tokenize', body: { content: 'hello', add_special: true, parse_special: true } },
  ]);
  calls.length = 0;
  await llamaTokenize({ messages: [{ role: 'user', content: 'hi' }] }, llamaPost(calls));
  assert.deepEqual(
    calls.map((c) => c.path),
    ['/apply-template', '/tokenize'],
  );
  assert.equal(calls[1]!.body.content, '<chat>hi</chat>');
  // An answer without ids is an error, not an empty prompt.
  await assert.rejects(
    llamaTokenize({ prompt: 'x' }, async () => ({ status: 200, json: { error: 'x' } })),
    /without token ids/,
  );
  // with_pieces answers objects
  const pieces = await llamaTokenize({ prompt: 'x' }, async () => ({
    status: 200,
    json: { tokens: [{ id: 7, piece: 'x' }] },
  }));
  assert.deepEqual(pieces.ids, [7]);
});

test('vLLM tokenize sends the body as built and reads max_model_len', async () => {
  const seen: unknown[] = [];
  const answer = await dialectOf('vllm').tokenize({ prompt: 'hi' }, async (path, body) => {
    seen.push([path, body]);
    return { status: 200, json: { tokens: [5], count: 1, max_model_len: 2048 } };
  });
  assert.deepEqual(answer, { ids: [5], maxModelLen: 2048 });
  assert.deepEqual(seen, [['/tokenize', { prompt: 'hi' }]]);
});

test('detection: /props is llama.cpp; else metric prefixes; else openai', () => {
  const props = { status: 200, json: JSON.parse(fixture('llamacpp.props.json')) };
  const metrics = (name: string) => ({ status: 200, text: fixture(name) });
  assert.equal(detectKind({ props, metrics: null }), 'llamacpp');
  assert.equal(detectKind({ props: null, metrics: metrics('llamacpp.metrics.txt') }), 'llamacpp');
  assert.equal(
    detectKind({ props: { status: 404, json: null }, metrics: metrics('vllm.metrics.txt') }),
    'vllm',
  );
  assert.equal(detectKind({ props: null, metrics: metrics('sglang.metrics.txt') }), 'sglang');
  assert.equal(detectKind({ props: null, metrics: { status: 404, text: 'not found' } }), 'openai');
  assert.equal(detectKind({ props: null, metrics: null }), 'openai');
});

test('the openai dialect reads no load and asks no tokenizer', async () => {
  const d = dialectOf('openai');
  assert.equal(d.loadPath, null);
  assert.equal(d.cacheSource, 'ledger');
  assert.equal(d.tokenizes, false);
  await assert.rejects(d.tokenize({ prompt: 'x' }, async () => ({ status: 200, json: {} })));
});
