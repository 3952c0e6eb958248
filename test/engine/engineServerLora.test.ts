import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import type { EngineServerHandle } from '../../src/engine/server/server.ts';
import { clientFor, filler, scrape, startTestEngine } from '../support/engineServerHelpers.ts';

const BASE = 'llama-3.3-70b';
let server: EngineServerHandle;
let client: OpenAI;

before(async () => {
  server = await startTestEngine({
    enableLora: true,
    lora: { maxLoras: 2 },
    loraModules: [
      { name: 'sql', path: '/adapters/sql' },
      { name: 'chat', path: '/adapters/chat', baseModelName: 'other-base' },
    ],
    allowRuntimeLoraUpdating: true,
  });
  client = clientFor(server);
});

after(async () => {
  await server.close();
});

type Card = OpenAI.Model & { root: string; parent: string | null; max_model_len: number | null };

test('/v1/models lists the adapters with root, parent and no max_model_len, as vLLM', async () => {
  const cards = (await client.models.list()).data as Card[];
  assert.deepEqual(
    cards.map((c) => [c.id, c.root, c.parent, c.max_model_len]),
    [
      [BASE, BASE, null, 131072],
      ['sql', '/adapters/sql', BASE, null],
      ['chat', '/adapters/chat', 'other-base', null],
    ],
  );
});

test('adapter requests warm only their adapter: no hits across adapters or with the base', async () => {
  const prompt = filler(300, 7);
  const cached = async (model: string) => {
    const r = await client.completions.create({ model, prompt, max_tokens: 2 });
    assert.equal(r.model, model, 'vLLM answers with the adapter name');
    return (
      r.usage as OpenAI.CompletionUsage & { prompt_tokens_details: { cached_tokens: number } }
    ).prompt_tokens_details.cached_tokens;
  };
  assert.equal(await cached('sql'), 0);
  assert.equal(await cached('chat'), 0, 'another adapter does not hit the first one');
  assert.equal(await cached(BASE), 0, 'the base model does not hit an adapter');
  const again = await cached('sql');
  assert.ok(again > 0, `the same adapter hits (${again} tokens)`);
  assert.ok((await cached(BASE)) > 0, 'the base model hits its own blocks');
});

test('an unknown model is a 404 with vLLM message', async () => {
  await assert.rejects(
    client.completions.create({ model: 'nope', prompt: 'hi', max_tokens: 1 }),
    (err: unknown) => {
      assert.ok(err instanceof OpenAI.NotFoundError);
      assert.equal(err.message, '404 The model `nope` does not exist.');
      return true;
    },
  );
});

const post = (path: string, body: unknown) =>
  fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

test('runtime API: load, use, reload refused, unload, then 404', async () => {
  const load = await post('/v1/load_lora_adapter', { lora_name: 'fresh', lora_path: '/a/fresh' });
  assert.equal(load.status, 200);
  assert.equal(await load.text(), "Success: LoRA adapter 'fresh' added successfully.");
  const ids = ((await client.models.list()).data as Card[]).map((c) => c.id);
  assert.ok(ids.includes('fresh'));
  const chat = await client.chat.completions.create({
    model: 'fresh',
    messages: [{ role: 'user', content: 'hello' }],
    max_tokens: 3,
  });
  assert.equal(chat.model, 'fresh');

  const twice = await post('/v1/load_lora_adapter', { lora_name: 'fresh', lora_path: '/a/fresh' });
  assert.equal(twice.status, 400);
  assert.deepEqual(await twice.json(), {
    error: {
      message:
        "The lora adapter 'fresh' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.",
      type: 'InvalidUserInput',
      param: null,
      code: 400,
    },
  });
  const inPlace = await post('/v1/load_lora_adapter', {
    lora_name: 'fresh',
    lora_path: '/a/fresh-v2',
    load_inplace: true,
  });
  assert.equal(inPlace.status, 200);

  const missing = await post('/v1/load_lora_adapter', { lora_name: 'x' });
  assert.equal(missing.status, 400);
  assert.equal(
    ((await missing.json()) as { error: { message: string } }).error.message,
    "Both 'lora_name' and 'lora_path' must be provided.",
  );

  const unload = await post('/v1/unload_lora_adapter', { lora_name: 'fresh' });
  assert.equal(unload.status, 200);
  assert.equal(await unload.text(), "Success: LoRA adapter 'fresh' removed successfully.");
  const gone = await post('/v1/unload_lora_adapter', { lora_name: 'fresh' });
  assert.equal(gone.status, 404);
  assert.deepEqual(await gone.json(), {
    error: {
      message: "The lora adapter 'fresh' cannot be found.",
      type: 'NotFoundError',
      param: null,
      code: 404,
    },
  });
  const noName = await post('/v1/unload_lora_adapter', {});
  assert.equal(noName.status, 400);
  await assert.rejects(
    client.completions.create({ model: 'fresh', prompt: 'hi', max_tokens: 1 }),
    OpenAI.NotFoundError,
  );
});

test('vllm:lora_requests_info carries running, waiting and max_lora labels, the time as value', async () => {
  const stream = await client.completions.create({
    model: 'sql',
    prompt: filler(50, 3),
    max_tokens: 3000,
    stream: true,
  });
  let samples: Map<string, number> | null = null;
  for await (const _chunk of stream) {
    samples = await scrape(server);
    break;
  }
  assert.ok(samples);
  const series = [...samples].filter(([k]) => k.startsWith('vllm:lora_requests_info{'));
  const running = series.find(([k]) => k.includes('running_lora_adapters="sql"'));
  assert.ok(running, `a series with sql running: ${series.map(([k]) => k).join(' ')}`);
  assert.match(running[0], /max_lora="2"/);
  assert.match(running[0], /waiting_lora_adapters=""/);
  assert.doesNotMatch(running[0], /model_name=/, 'no default labels, as vLLM');
  const nowS = Date.now() / 1000;
  assert.ok(Math.abs(running[1] - nowS) < 60, 'the value is the time of the scrape');
});

test('without the runtime flag the load endpoints do not exist; without LoRA adapters are 404', async () => {
  const plain = await startTestEngine();
  try {
    const res = await fetch(`${plain.url}/v1/load_lora_adapter`, {
      method: 'POST',
      body: JSON.stringify({ lora_name: 'a', lora_path: '/a' }),
    });
    assert.equal(res.status, 404);
    await assert.rejects(
      clientFor(plain).completions.create({ model: 'sql', prompt: 'hi', max_tokens: 1 }),
      OpenAI.NotFoundError,
    );
    const metrics = await (await fetch(`${plain.url}/metrics`)).text();
    assert.doesNotMatch(metrics, /vllm:lora_requests_info/);
  } finally {
    await plain.close();
  }
  await assert.rejects(
    startTestEngine({ loraModules: [{ name: 'a', path: '/a' }] }),
    /--lora-modules needs --enable-lora/,
  );
});
