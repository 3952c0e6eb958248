import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type OpenAI from 'openai';
import type { EngineServerHandle } from '../../src/engine/server/server.ts';
import { encodeChat } from '../../src/tokenizer/chatTemplate.ts';
import { getTokenizer } from '../../src/tokenizer/tokenizer.ts';
import { clientFor, filler, startTestEngine } from '../support/engineServerHelpers.ts';

const MODEL = 'llama-3.3-70b';
let server: EngineServerHandle;
let client: OpenAI;

before(async () => {
  server = await startTestEngine({ speedup: 200 });
  client = clientFor(server);
});

after(async () => {
  await server.close();
});

test('GET /v1/models lists the served model with max_model_len; /health is 200', async () => {
  const list = await client.models.list();
  assert.equal(list.data.length, 1);
  const model = list.data[0] as OpenAI.Model & { max_model_len: number };
  assert.equal(model.id, MODEL);
  assert.equal(model.max_model_len, 131072);
  const health = await fetch(`${server.url}/health`);
  assert.equal(health.status, 200);
  assert.equal(await health.text(), '');
});

test('completions: text prompt, usage, finish_reason, deterministic text', async () => {
  const prompt = 'The quick brown fox jumps over the lazy dog.';
  const a = await client.completions.create({ model: MODEL, prompt, max_tokens: 7 });
  assert.equal(a.object, 'text_completion');
  assert.equal(a.choices.length, 1);
  assert.equal(a.choices[0]?.finish_reason, 'length');
  assert.equal(a.usage?.prompt_tokens, getTokenizer().encode(prompt).length);
  assert.equal(a.usage?.completion_tokens, 7);
  assert.equal(getTokenizer().encode(a.choices[0]!.text).length, 7);
  const b = await client.completions.create({ model: MODEL, prompt, max_tokens: 7 });
  assert.equal(b.choices[0]?.text, a.choices[0]?.text, 'same seed and prompt, same text');
  const c = await client.completions.create({ model: MODEL, prompt, max_tokens: 7, seed: 42 });
  assert.notEqual(c.choices[0]?.text, a.choices[0]?.text, 'a request seed changes the text');
});

test('completions: prompt as token ids, and no model field uses the served model', async () => {
  const res = await fetch(`${server.url}/v1/completions`, {
    method: 'POST',
    body: JSON.stringify({ prompt: [1, 2, 3, 4, 5], max_tokens: 2 }),
  });
  assert.equal(res.status, 200);
  const body = (await res.json()) as OpenAI.Completion;
  assert.equal(body.model, MODEL);
  assert.equal(body.usage?.prompt_tokens, 5);
  assert.equal(body.usage?.completion_tokens, 2);
});

test('chat: non-streaming answer with the template counted in prompt tokens', async () => {
  const messages = [
    { role: 'system' as const, content: 'Be brief.' },
    { role: 'user' as const, content: 'Say something.' },
  ];
  const res = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 5 });
  assert.equal(res.object, 'chat.completion');
  assert.equal(res.choices[0]?.message.role, 'assistant');
  assert.equal(res.choices[0]?.finish_reason, 'length');
  assert.equal(res.usage?.completion_tokens, 5);
  assert.equal(res.usage?.prompt_tokens, encodeChat(getTokenizer(), messages).length);
});

test('chat streaming with include_usage: a role chunk, one chunk per token, then usage, then [DONE]', async () => {
  const stream = await client.chat.completions.create({
    model: MODEL,
    messages: [{ role: 'user', content: 'Stream please.' }],
    max_tokens: 6,
    stream: true,
    stream_options: { include_usage: true },
  });
  const chunks: OpenAI.ChatCompletionChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  const content = chunks.filter((c) => c.choices.length > 0);
  // vLLM sends the role alone first ({role, content: ""}), then one chunk per token.
  assert.equal(content.length, 7);
  assert.deepEqual(content[0]?.choices[0]?.delta, { role: 'assistant', content: '' });
  assert.ok(content.slice(1).every((c) => (c.choices[0]?.delta.content ?? '').length > 0));
  assert.equal(content.at(-1)?.choices[0]?.finish_reason, 'length');
  assert.ok(content.slice(0, -1).every((c) => c.choices[0]?.finish_reason === null));
  const last = chunks.at(-1)!;
  assert.deepEqual(last.choices, []);
  assert.equal(last.usage?.completion_tokens, 6);
  assert.equal(last.usage?.prompt_tokens_details?.cached_tokens, 0);
});

test('completions streaming ends with data: [DONE] on the wire; no usage unless asked', async () => {
  const res = await fetch(`${server.url}/v1/completions`, {
    method: 'POST',
    body: JSON.stringify({ model: MODEL, prompt: 'count', max_tokens: 3, stream: true }),
  });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
  const text = await res.text();
  const events = text.split('\n\n').filter((e) => e !== '');
  assert.equal(events.length, 4);
  assert.ok(events.every((e) => e.startsWith('data: ')));
  assert.equal(events.at(-1), 'data: [DONE]');
  const parsed = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)) as OpenAI.Completion);
  assert.ok(parsed.every((p) => p.usage === undefined && p.choices.length === 1));
  assert.equal(parsed.at(-1)?.choices[0]?.finish_reason, 'length');
});

test('a repeated prefix reports cached tokens; another cache_salt does not share them', async () => {
  const system = filler(1500, 7);
  const ask = async (question: string, salt?: string) => {
    const params = {
      model: MODEL,
      prompt: `${system}\nQuestion: ${question}`,
      max_tokens: 2,
      ...(salt && { cache_salt: salt }),
    };
    const res = await client.completions.create(params);
    return {
      prompt: res.usage!.prompt_tokens,
      cached: res.usage!.prompt_tokens_details?.cached_tokens ?? -1,
    };
  };
  const cold = await ask('first?');
  assert.equal(cold.cached, 0);
  const warm = await ask('second?');
  const shared = getTokenizer().encode(`${system}\nQuestion:`).length;
  assert.ok(warm.cached > 0 && warm.cached % 16 === 0, `cached ${warm.cached}`);
  assert.ok(warm.cached <= shared && warm.cached > shared - 32, `${warm.cached} vs ${shared}`);
  const salted = await ask('second?', 'tenant-b');
  assert.equal(salted.cached, 0, 'a salted prompt never hits unsalted blocks');
  const saltedAgain = await ask('third?', 'tenant-b');
  assert.equal(saltedAgain.cached, warm.cached, 'but hits its own salt');
});

test('200 concurrent streams all finish', async () => {
  const streams = Array.from({ length: 200 }, async (_, i) => {
    const stream = await client.completions.create({
      model: MODEL,
      prompt: `stream ${i}: ${filler(20, i)}`,
      max_tokens: 12,
      stream: true,
      stream_options: { include_usage: true },
    });
    let tokens = 0;
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      if (chunk.choices.length > 0) tokens++;
      if (chunk.usage) usage = chunk.usage;
    }
    return { tokens, completion: usage?.completion_tokens };
  });
  const results = await Promise.all(streams);
  assert.equal(results.length, 200);
  for (const r of results) assert.deepEqual(r, { tokens: 12, completion: 12 });
  const c = server.counters();
  assert.equal(c.running + c.waiting, 0);
});
