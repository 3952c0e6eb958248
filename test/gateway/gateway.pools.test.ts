/**
 * Model pools end to end: two models behind one gateway (two simulated engines each, started as
 * embedded fleets with different served names) and a LoRA adapter on one of them. The simulated
 * engine has no LoRA support yet, so the adapter is served by a stand-in backend that speaks
 * vLLM's side of it: `/v1/models` lists the adapter with its `parent`, and a request for it
 * publishes vLLM KV events whose `lora_name` is the adapter's, as vLLM does.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { Publisher } from 'zeromq';
import { type EmbeddedFleet, startEmbeddedFleet } from '../../src/embedded/fleet.ts';
import { applyConfigDoc, defaultConfig } from '../../src/serving/config.ts';
import { servedModels } from '../../src/serving/models.ts';
import { computeBlockKeys } from '../../src/kv/blockKey.ts';
import { encodeEventBatch, encodeSeq } from '../../src/kv/wire.ts';
import {
  complete,
  configFor,
  type GatewayHandle,
  replicas,
  tokens,
  waitFor,
} from '../support/gateway.harness.ts';
import { startGateway } from '../../src/gateway/gateway.ts';

const MODEL_A = 'model-a';
const MODEL_B = 'model-b';
const ADAPTER = 'b-sql';
const BLOCK = 16;

/** A vLLM-like backend of MODEL_B with one loaded adapter; records the `model` of each request. */
class AdapterBackend {
  readonly models: string[] = [];
  url = '';
  readonly #server: Server;
  readonly #pub = new Publisher({ linger: 0 });
  #seq = 0n;

  constructor() {
    this.#server = createServer((req, res) => {
      if (req.url === '/health') return void res.end();
      if (req.url === '/metrics') {
        res.end(
          'vllm:kv_cache_usage_perc 0.1\nvllm:num_requests_running 0\nvllm:num_requests_waiting 0\n',
        );
        return;
      }
      if (req.url === '/v1/models') {
        const created = 1_700_000_000;
        const card = { object: 'model', created, owned_by: 'vllm', permission: [] };
        res.setHeader('content-type', 'application/json');
        res.end(
          JSON.stringify({
            object: 'list',
            data: [
              { ...card, id: MODEL_B, root: MODEL_B, parent: null, max_model_len: 4096 },
              {
                ...card,
                id: ADAPTER,
                root: '/adapters/b-sql',
                parent: MODEL_B,
                max_model_len: null,
              },
            ],
          }),
        );
        return;
      }
      if (req.url !== '/v1/completions') {
        // No /tokenize here: the gateway's tokenizer check reads 'unknown'.
        res.writeHead(404).end();
        return;
      }
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', async () => {
        const body = JSON.parse(Buffer.concat(chunks).toString()) as {
          model: string;
          prompt: number[];
        };
        this.models.push(body.model);
        // As vLLM: the prompt's full blocks are stored, keyed with the adapter's name.
        const lora = body.model === ADAPTER ? ADAPTER : null;
        const full = body.prompt.slice(0, body.prompt.length - (body.prompt.length % BLOCK));
        await this.publish([
          {
            type: 'BlockStored',
            blockKeys: computeBlockKeys(full, BLOCK, { loraName: lora ?? undefined }),
            parentKey: null,
            tokenIds: full,
            blockSize: BLOCK,
            loraName: lora,
            cacheSalt: null,
          },
        ]);
        res.setHeader('content-type', 'application/json');
        res.end(
          JSON.stringify({
            id: 'cmpl-1',
            object: 'text_completion',
            created: 1_700_000_000,
            model: body.model,
            choices: [{ index: 0, text: ' ok', finish_reason: 'length', logprobs: null }],
            usage: { prompt_tokens: body.prompt.length, completion_tokens: 1, total_tokens: 1 },
          }),
        );
      });
    });
  }

  async start(): Promise<void> {
    await this.#pub.bind('tcp://127.0.0.1:*');
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  get events(): string {
    return this.#pub.lastEndpoint!;
  }

  async publish(events: Parameters<typeof encodeEventBatch>[0]): Promise<void> {
    const payload = encodeEventBatch(events, { tsS: 1 });
    await this.#pub.send([Buffer.alloc(0), encodeSeq(this.#seq++), payload]);
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    this.#pub.close();
  }
}

describe('two models with two engines each, and an adapter on one of them', () => {
  let fleetA: EmbeddedFleet;
  let fleetB: EmbeddedFleet;
  let adapterBackend: AdapterBackend;
  let gw: GatewayHandle;
  let openai: OpenAI;
  before(async () => {
    fleetA = await startEmbeddedFleet({
      replicas: 2,
      speedup: 50,
      engine: { servedModelName: MODEL_A },
    });
    fleetB = await startEmbeddedFleet({
      replicas: 2,
      speedup: 50,
      engine: { servedModelName: MODEL_B },
    });
    adapterBackend = new AdapterBackend();
    await adapterBackend.start();
    gw = await startGateway(
      configFor([], {
        backends: [
          ...fleetA.backends,
          ...fleetB.backends,
          // No model= here: the pool comes from its /v1/models.
          {
            url: adapterBackend.url,
            events: adapterBackend.events,
            replay: null,
            model: null,
            apiKey: null,
          },
        ],
      }),
    );
    openai = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'x', maxRetries: 0, timeout: 120_000 });
    // The SUB joins asynchronously: publish empty batches until the gateway hears one.
    const name = new URL(adapterBackend.url).host;
    await waitFor(async () => {
      await adapterBackend.publish([]);
      const r = (await replicas(gw)).find((x) => x.name === name);
      return (r?.subscriber?.batches ?? 0) > 0;
    }, 'the adapter backend to be subscribed');
  });
  after(async () => {
    await gw?.close();
    await adapterBackend?.close();
    await fleetA?.close();
    await fleetB?.close();
  });

  test('/v1/models lists both models and the adapter as vLLM does, for models.list()', async () => {
    const cards = [];
    for await (const card of openai.models.list()) cards.push(card);
    const byId = new Map(cards.map((c) => [c.id, c as unknown as Record<string, unknown>]));
    assert.deepEqual([...byId.keys()].sort(), [ADAPTER, MODEL_A, MODEL_B]);
    for (const id of [MODEL_A, MODEL_B]) {
      assert.equal(byId.get(id)!.parent, null);
      assert.equal(byId.get(id)!.object, 'model');
      assert.ok(Number(byId.get(id)!.max_model_len) > 0, `${id} has max_model_len`);
    }
    assert.equal(byId.get(ADAPTER)!.parent, MODEL_B);
    assert.equal(byId.get(ADAPTER)!.max_model_len, null);
  });

  test('requests land in the pool of their model', async () => {
    const poolOf = (fleet: EmbeddedFleet) => fleet.engines.map((e) => new URL(e.url).host);
    const before = [...fleetA.engines, ...fleetB.engines].map((e) => e.counters().promptTokens);
    for (let i = 0; i < 8; i++) {
      for (const [model, fleet] of [
        [MODEL_A, fleetA],
        [MODEL_B, fleetB],
      ] as const) {
        const { data, response } = await openai.completions
          .create({ model, prompt: tokens(100 + i, 64), max_tokens: 2 })
          .withResponse();
        assert.equal(data.model, model);
        const replica = response.headers.get('x-kvroute-replica')!;
        const allowed = [
          ...poolOf(fleet),
          ...(model === MODEL_B ? [new URL(adapterBackend.url).host] : []),
        ];
        assert.ok(allowed.includes(replica), `${model} went to ${replica}`);
      }
    }
    const after = [...fleetA.engines, ...fleetB.engines].map((e) => e.counters().promptTokens);
    const grewA = after[0]! + after[1]! - before[0]! - before[1]!;
    assert.ok(grewA >= 8 * 64, `model-a engines prefilled ${grewA} tokens`);
    const snap = (await (await fetch(`${gw.url}/router/replicas`)).json()) as {
      pools: { model: string; replicas: string[] }[];
      replicas: { name: string; model: string }[];
    };
    assert.deepEqual(snap.pools.map((p) => p.model).sort(), [MODEL_A, MODEL_B]);
    for (const r of snap.replicas) {
      assert.equal(r.model, poolOf(fleetA).includes(r.name) ? MODEL_A : MODEL_B);
    }
  });

  test('adapter requests go to a replica with the adapter and warm only its cache', async () => {
    const { pool } = await gw.pools.resolve(ADAPTER);
    const poolA = (await gw.pools.resolve(MODEL_A)).pool;
    assert.equal(pool.model, MODEL_B);
    const prompt = tokens(7_777, 8 * BLOCK);
    const cachedB = () => pool.router.counters().cachedTokens;
    const cachedA = poolA.router.counters().cachedTokens;
    const adapterHost = new URL(adapterBackend.url).host;

    const first = await openai.completions
      .create({ model: ADAPTER, prompt, max_tokens: 1 })
      .withResponse();
    assert.equal(first.response.headers.get('x-kvroute-replica'), adapterHost);
    assert.equal(adapterBackend.models.at(-1), ADAPTER);
    await waitFor(
      () => pool.router.snapshot().replicas.find((r) => r.name === adapterHost)!.indexedBlocks >= 8,
      "the adapter's blocks to be indexed",
    );

    // The same prompt for the base model shares nothing with the adapter's blocks.
    const beforeBase = cachedB();
    const base = await complete(gw.url, { model: MODEL_B, prompt, max_tokens: 1 });
    assert.equal(base.status, 200, base.text);
    assert.equal(cachedB(), beforeBase, 'the base model found the prompt cached');

    // The adapter's second request finds its own blocks.
    const beforeAdapter = cachedB();
    const again = await openai.completions
      .create({ model: ADAPTER, prompt, max_tokens: 1 })
      .withResponse();
    assert.equal(again.response.headers.get('x-kvroute-replica'), adapterHost);
    assert.equal(cachedB() - beforeAdapter, 8 * BLOCK);
    assert.equal(poolA.router.counters().cachedTokens, cachedA, 'the other pool is untouched');
  });

  test("an unknown model is vLLM's 404 through the openai client", async () => {
    await assert.rejects(
      openai.completions.create({ model: 'no-such-model', prompt: 'hi', max_tokens: 1 }),
      (err: unknown) => {
        assert.ok(err instanceof OpenAI.NotFoundError, String(err));
        assert.equal(err.status, 404);
        assert.equal(err.param, 'model');
        assert.match(err.message, /The model `no-such-model` does not exist\./);
        return true;
      },
    );
    const chat = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] }),
    });
    assert.equal(chat.status, 404);
    assert.deepEqual(await chat.json(), {
      error: {
        message: 'The model `no-such-model` does not exist.',
        type: 'NotFoundError',
        param: 'model',
        code: 404,
      },
    });
  });

  test('no model with several pools is a 400 naming the field', async () => {
    const r = await complete(gw.url, { prompt: 'hi', max_tokens: 1 });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json?.error?.param, 'model');
    assert.match(r.json?.error?.message ?? '', /several models/);
  });
});

test('served models: base names first, adapters by parent, the configured name first of all', () => {
  const card = (id: string, parent: string | null) => ({ id, object: 'model' as const, parent });
  const bases = [card('m', null), card('m-alias', null), card('lora', 'm')];
  const unnamed = servedModels(bases, null);
  assert.deepEqual(unnamed.bases, ['m', 'm-alias']);
  assert.deepEqual([...unnamed.adapters.keys()], ['lora']);
  // model= in its entry is the name it is served under; the engine's own ids answer too.
  const s = servedModels(bases, 'x');
  assert.deepEqual(s.bases, ['x', 'm', 'm-alias']);
  assert.deepEqual(s.reported, ['m', 'm-alias']);
  assert.deepEqual(
    s.cards.map((c) => c.id),
    ['x', 'm', 'm-alias', 'lora'],
  );
  assert.deepEqual(servedModels(bases, 'm').bases, ['m', 'm-alias'], 'no name twice');
  assert.deepEqual([...s.adapters.keys()], ['lora']);
  const fallback = servedModels(null, 'configured');
  assert.deepEqual(fallback.bases, ['configured']);
  assert.equal(fallback.cards[0]!.id, 'configured');
  assert.equal(fallback.cards[0]!.parent, null);
  assert.deepEqual(servedModels(null, null).bases, []);
});

test("a pool's own tokenizer and template come from the config's models key", () => {
  const config = applyConfigDoc(
    { tokenizer: 'builtin', models: { [MODEL_B]: { 'chat-template': 'b.yaml' } } },
    defaultConfig(),
  );
  assert.deepEqual(config.modelTokenizers, {
    [MODEL_B]: { tokenizer: null, chatTemplate: 'b.yaml' },
  });
  assert.throws(
    () => applyConfigDoc({ models: { [MODEL_B]: { vocab: 'x' } } }, defaultConfig()),
    /models\.model-b\.vocab is not a known key/,
  );
});
