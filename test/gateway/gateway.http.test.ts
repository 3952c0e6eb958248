/**
 * The gateway's HTTP contract: failures never hang a client, byte-identical streams, tenants and
 * API keys, and every bad input answered before anything is forwarded.
 */
import assert from 'node:assert/strict';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { defaultConfig } from '../../src/serving/config.ts';
import { DEFAULT_POLICY } from '../../src/router/defaults.ts';
import { startGateway } from '../../src/gateway/gateway.ts';
import {
  complete,
  type EngineServerHandle,
  type GatewayHandle,
  replicas,
  startEngines,
  startGatewayFor,
  tokens,
  waitFor,
  within,
} from '../support/gateway.harness.ts';

const MODEL = 'llama-3.3-70b';

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

describe('an engine dies mid-run', () => {
  let engines: EngineServerHandle[] = [];
  let gw: GatewayHandle;
  before(async () => {
    engines = await startEngines(3, { speedup: 5 });
    gw = await startGatewayFor(engines);
  });
  after(async () => {
    await gw?.close();
    await Promise.all(engines.map((e) => e.close()));
  });

  test('every request completes or gets an explicit error; none hangs', async () => {
    const openai = new OpenAI({
      baseURL: `${gw.url}/v1`,
      apiKey: 'x',
      maxRetries: 0,
      timeout: 120_000,
    });
    const outcomes = Array.from({ length: 24 }, async (_, i) => {
      try {
        const stream = await openai.completions.create({
          model: MODEL,
          prompt: tokens(500 + (i % 6), 512),
          max_tokens: 60,
          stream: true,
        });
        let chunks = 0;
        for await (const _chunk of stream) chunks++;
        return chunks === 60 ? 'completed' : `short:${chunks}`;
      } catch (err) {
        return err instanceof OpenAI.APIError ? 'error' : `threw:${(err as Error).message}`;
      }
    });
    // One stream that cannot end before the kill: its replica is the victim, killed once its
    // first token has reached the client, so a stream is surely in flight there, however late a
    // busy host runs the rest.
    let servedBy = '';
    let firstToken: () => void;
    const streaming = new Promise<void>((resolve) => {
      firstToken = resolve;
    });
    const long = (async () => {
      try {
        const { data: stream, response } = await openai.completions
          .create({ model: MODEL, prompt: tokens(499, 512), max_tokens: 20_000, stream: true })
          .withResponse();
        servedBy = response.headers.get('x-kvroute-replica') ?? '';
        for await (const _chunk of stream) firstToken!();
        return 'completed';
      } catch (err) {
        firstToken!();
        return err instanceof OpenAI.APIError ? 'error' : `threw:${(err as Error).message}`;
      }
    })();
    await within(120_000, streaming, 'the long stream to start');
    const busiest = { name: servedBy };
    const victim = engines.find((e) => e.url.endsWith(busiest.name))!;
    await victim.close();
    assert.equal(await within(120_000, long, 'the long stream'), 'error');
    const results = await within(120_000, Promise.all(outcomes), 'a request');
    for (const r of results) assert.ok(r === 'completed' || r === 'error', r);
    assert.ok(results.includes('completed'));
    // New requests go around the dead replica (retried, then it is marked down).
    for (let i = 0; i < 4; i++) {
      const r = await complete(gw.url, { prompt: tokens(900 + i, 64), max_tokens: 2 });
      assert.equal(r.status, 200, r.text);
      assert.notEqual(r.replica, busiest.name);
    }
    const dead = (await replicas(gw)).find((r) => r.name === busiest.name)!;
    assert.equal(dead.healthy, false);
  });
});

describe('streams pass through byte for byte', () => {
  // A backend whose SSE bytes are awkward on purpose: a comment, CRLF line ends, a multi-byte
  // character split across writes, and writes that cut events anywhere.
  const events = [
    ': keep-alive comment\n\n',
    'data: {"id":"x","object":"text_completion","choices":[{"index":0,"text":"","finish_reason":null}]}\r\n\r\n',
    'data: {"id":"x","object":"text_completion","choices":[{"index":0,"text":"héllo ✓","finish_reason":null}]}\n\n',
    'data: {"id":"x","object":"text_completion","choices":[{"index":0,"text":" world","finish_reason":"length"}]}\n\n',
    'data: [DONE]\n\n',
  ];
  const bytes = Buffer.from(events.join(''));
  let backend: Server;
  let gw: GatewayHandle;
  let mode: 'whole' | 'cut' = 'whole';
  before(async () => {
    backend = createServer((req, res) => {
      if (req.url === '/metrics') {
        res.end(
          'vllm:kv_cache_usage_perc 0.1\nvllm:num_requests_running 0\nvllm:num_requests_waiting 0\n',
        );
        return;
      }
      if (req.url === '/health') return void res.end();
      req.resume();
      req.on('end', async () => {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'x-backend': 'fake' });
        // Odd-sized writes, one of them inside the 3-byte check mark.
        const cuts = [7, 40, 133, bytes.indexOf('✓') + 1, bytes.length - 5];
        let at = 0;
        for (const cut of cuts) {
          res.write(bytes.subarray(at, cut));
          at = cut;
          await new Promise((r) => setTimeout(r, 5));
          if (mode === 'cut' && cut > 200) {
            res.socket?.destroy();
            return;
          }
        }
        res.end(bytes.subarray(at));
      });
    });
    const url = await listen(backend);
    gw = await startGateway({
      ...defaultConfig(),
      port: 0,
      backends: [{ url, events: null, replay: null, model: 'fake', apiKey: null }],
    });
  });
  after(async () => {
    await gw?.close();
    await closeServer(backend);
  });

  test('the client receives exactly the bytes the backend sent', async () => {
    mode = 'whole';
    const res = await fetch(`${gw.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'fake', prompt: 'hi', stream: true }),
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    assert.equal(res.headers.get('x-backend'), 'fake');
    assert.ok(res.headers.get('x-kvroute-replica'));
    assert.ok(Buffer.from(await res.arrayBuffer()).equals(bytes));
    assert.equal(gw.router.snapshot().inFlightRequests, 0);
  });

  test('a backend failure after bytes went out ends the stream with an error event and [DONE]', async () => {
    mode = 'cut';
    const res = await fetch(`${gw.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'fake', prompt: 'hi', stream: true }),
    });
    const text = await within(5_000, res.text(), 'the cut stream');
    assert.ok(text.startsWith(bytes.subarray(0, 133).toString()));
    assert.match(
      text,
      /\n\ndata: \{"error":\{"message":"upstream failed mid-stream[^\n]*\n\ndata: \[DONE\]\n\n$/,
    );
    assert.equal(gw.router.snapshot().inFlightRequests, 0);
  });

  test('the real engine streams through the openai client', async () => {
    const engines = await startEngines(1, { speedup: 50 });
    const real = await startGatewayFor(engines);
    try {
      const openai = new OpenAI({ baseURL: `${real.url}/v1`, apiKey: 'x', maxRetries: 0 });
      const stream = await openai.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'Say hello' }],
        max_tokens: 8,
        stream: true,
        stream_options: { include_usage: true },
      });
      let text = '';
      let usage = null;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta?.content ?? '';
        usage = chunk.usage ?? usage;
      }
      assert.ok(text.length > 0);
      assert.equal(usage?.completion_tokens, 8);
    } finally {
      await real.close();
      await engines[0]!.close();
    }
  });
});

describe('tenants and API keys', () => {
  let engines: EngineServerHandle[] = [];
  let gw: GatewayHandle;
  const keyA = 'sk-tenant-a';
  const keyB = 'sk-tenant-b';
  before(async () => {
    engines = await startEngines(2, { speedup: 50 });
    gw = await startGatewayFor(engines, {
      apiKeys: [
        { key: keyA, tenant: 'a' },
        { key: keyB, tenant: 'b' },
      ],
      tenantSalts: { a: 'salt-a' },
    });
  });
  after(async () => {
    await gw?.close();
    await Promise.all(engines.map((e) => e.close()));
  });

  const promptTokensServed = () => engines.reduce((sum, e) => sum + e.counters().promptTokens, 0);

  test('a missing or wrong key gets 401 and nothing is forwarded', async () => {
    const before = promptTokensServed();
    const body = { model: MODEL, prompt: 'hello', max_tokens: 1 };
    const none = await complete(gw.url, body);
    assert.equal(none.status, 401);
    assert.equal(none.json?.error?.code, 401);
    assert.equal(none.json?.error?.type, 'AuthenticationError');
    const wrong = await complete(gw.url, body, { authorization: 'Bearer sk-nope' });
    assert.equal(wrong.status, 401);
    const openai = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'sk-nope', maxRetries: 0 });
    await assert.rejects(openai.completions.create(body), OpenAI.AuthenticationError);
    assert.equal(promptTokensServed(), before);
    const ok = await complete(gw.url, body, { authorization: `Bearer ${keyA}` });
    assert.equal(ok.status, 200, ok.text);
  });

  test('two tenants with different salts never share cache entries', async () => {
    const prompt = tokens(4242, 1_024);
    const asA = { authorization: `Bearer ${keyA}` };
    const asB = { authorization: `Bearer ${keyB}` };
    const cachedAt = (r: Awaited<ReturnType<typeof complete>>) =>
      r.json?.usage?.prompt_tokens_details?.cached_tokens ?? 0;
    const a1 = await complete(gw.url, { model: MODEL, prompt, max_tokens: 1 }, asA);
    assert.equal(cachedAt(a1), 0);
    await waitFor(
      () => gw.router.snapshot().replicas.find((r) => r.name === a1.replica)!.indexedBlocks >= 64,
      'tenant a blocks indexed',
    );
    const a2 = await complete(gw.url, { model: MODEL, prompt, max_tokens: 1 }, asA);
    assert.equal(a2.replica, a1.replica);
    assert.ok(cachedAt(a2) >= 1_000, `cached ${cachedAt(a2)}`);
    // Same tokens, other tenant: neither the router nor the engine may see a hit.
    const cachedBefore = gw.router.counters().cachedTokens;
    const b1 = await complete(gw.url, { model: MODEL, prompt, max_tokens: 1 }, asB);
    assert.equal(b1.status, 200);
    assert.equal(cachedAt(b1), 0);
    assert.equal(gw.router.counters().cachedTokens, cachedBefore);
    // A request's own cache_salt subdivides within its tenant; it cannot escape it.
    const b2 = await complete(
      gw.url,
      { model: MODEL, prompt, max_tokens: 1, cache_salt: 'salt-a' },
      asB,
    );
    assert.equal(cachedAt(b2), 0);
  });
});

describe('bad input', () => {
  let engines: EngineServerHandle[] = [];
  let gw: GatewayHandle;
  before(async () => {
    engines = await startEngines(1, { speedup: 50 });
    gw = await startGatewayFor(engines, { bodyLimitBytes: 64 * 1024 });
  });
  after(async () => {
    await gw?.close();
    await Promise.all(engines.map((e) => e.close()));
  });

  const post = (path: string, body: string, headers: Record<string, string> = {}) =>
    fetch(`${gw.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body,
    });

  test('malformed JSON and missing fields are 400s that never reach the engine', async () => {
    const before = engines[0]!.counters().promptTokens;
    const cases: [string, string][] = [
      ['/v1/completions', '{"prompt": "x"'],
      ['/v1/completions', '[1, 2]'],
      ['/v1/completions', '{"model": "m"}'],
      ['/v1/completions', '{"prompt": 5}'],
      ['/v1/completions', '{"prompt": "x", "stream": "yes"}'],
      ['/v1/completions', '{"prompt": "x", "max_tokens": -1}'],
      ['/v1/chat/completions', '{"model": "m"}'],
      ['/v1/chat/completions', '{"messages": [{"content": "no role"}]}'],
    ];
    for (const [path, body] of cases) {
      const res = await post(path, body);
      assert.equal(res.status, 400, body);
      const json = (await res.json()) as { error: { message: string; type: string; code: number } };
      assert.equal(json.error.code, 400, body);
      assert.equal(json.error.type, 'BadRequestError');
      assert.ok(json.error.message.length > 0);
    }
    assert.equal(engines[0]!.counters().promptTokens, before);
  });

  test('a body over the limit is 413', async () => {
    const res = await post('/v1/completions', JSON.stringify({ prompt: 'x'.repeat(100_000) }));
    assert.equal(res.status, 413);
    assert.equal(((await res.json()) as { error: { code: number } }).error.code, 413);
  });

  test('an upstream error status passes through with its body', async () => {
    const body = JSON.stringify({ model: MODEL, prompt: 'hello', max_tokens: 10_000_000 });
    const direct = await fetch(`${engines[0]!.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    const viaGateway = await post('/v1/completions', body);
    assert.equal(viaGateway.status, direct.status);
    assert.equal(viaGateway.status, 400);
    assert.equal(await viaGateway.text(), await direct.text());
    const wrongModel = await post(
      '/v1/completions',
      JSON.stringify({ model: 'nope', prompt: 'x' }),
    );
    assert.equal(wrongModel.status, 404);
  });

  test('own endpoints: health, models, metrics, replicas, 404 and 405', async () => {
    assert.equal((await fetch(`${gw.url}/health`)).status, 200);
    const models = (await (await fetch(`${gw.url}/v1/models`)).json()) as {
      data: { id: string }[];
    };
    assert.deepEqual(
      models.data.map((m) => m.id),
      [MODEL],
    );
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    assert.match(metrics, /kvroute_gateway_decision_seconds_bucket/);
    assert.match(
      metrics,
      /kvroute_gateway_replica_queued_prompt_tokens\{replica="127\.0\.0\.1:\d+",model="[^"]+"\} 0/,
    );
    const snap = (await (await fetch(`${gw.url}/router/replicas`)).json()) as { policy: string };
    assert.equal(snap.policy, DEFAULT_POLICY);
    assert.equal((await fetch(`${gw.url}/nope`)).status, 404);
    const wrongMethod = await fetch(`${gw.url}/v1/completions`);
    assert.equal(wrongMethod.status, 405);
    assert.equal(wrongMethod.headers.get('allow'), 'POST');
  });

  test('no healthy backend is 503 with Retry-After', async () => {
    const probe = createServer();
    const deadUrl = await listen(probe);
    await closeServer(probe);
    const dead = await startGateway({
      ...defaultConfig(),
      port: 0,
      backends: [{ url: deadUrl, events: null, replay: null, model: null, apiKey: null }],
    });
    try {
      for (let i = 0; i < 2; i++) {
        const r = await complete(dead.url, { prompt: 'hello', max_tokens: 1 });
        assert.equal(r.status, 503);
        assert.equal(r.json?.error?.code, 503);
        assert.equal(r.json?.error?.type, 'ServiceUnavailableError');
      }
      const res = await fetch(`${dead.url}/v1/completions`, {
        method: 'POST',
        body: JSON.stringify({ prompt: 'x' }),
      });
      assert.equal(res.status, 503);
      assert.equal(res.headers.get('retry-after'), '1');
    } finally {
      await dead.close();
    }
  });

  test('a client that stops reading does not stall the others', async () => {
    // Open a long stream and never read it: its socket fills and only its upstream pauses.
    const stalled = httpRequest(`${gw.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
    });
    const gotHead = new Promise<void>((resolve) => {
      stalled.on('response', (res) => {
        res.pause();
        resolve();
      });
    });
    stalled.on('error', () => {});
    stalled.end(JSON.stringify({ model: MODEL, prompt: 'x', max_tokens: 20_000, stream: true }));
    await within(120_000, gotHead, 'the stalled stream to start');
    const others = await within(
      120_000,
      Promise.all(
        Array.from({ length: 5 }, (_, i) =>
          complete(gw.url, { prompt: tokens(i, 32), max_tokens: 4 }),
        ),
      ),
      'requests beside a stalled client',
    );
    for (const r of others) assert.equal(r.status, 200);
    stalled.destroy();
    await waitFor(
      () => gw.router.snapshot().inFlightRequests === 0,
      'the stalled request to be freed',
    );
  });
});
