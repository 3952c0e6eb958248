/**
 * Connections and lifecycle in front of engines that behave as llama-server does, on real
 * sockets on 127.0.0.1: a kept-alive connection closed under a request is sent again on a fresh
 * one to the same replica (not marked down, its cache kept); a backend that refused its first
 * probes comes up within a second of its first answer (the probe backoff, followed without a
 * clock); `model=` keeps a replica in its pool when its engine's model id changes; llama.cpp's
 * `timings` pass through streams (the usage chunk the gateway asked for is stripped, its engine
 * fields kept) and non-streamed answers; `/ready` is 503 until every model has a healthy backend.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { after, describe, test } from 'node:test';
import OpenAI from 'openai';
import { defaultConfig, type GatewayConfig } from '../../src/serving/config.ts';
import { startGateway } from '../../src/gateway/gateway.ts';
import {
  HEALTH_BACKOFF_FIRST_MAX_MS,
  HEALTH_BACKOFF_MAX_MS,
  HealthChecker,
  nextProbeDelayMs,
} from '../../src/serving/health.ts';
import { isClosedConnection, isKeepAliveRace } from '../../src/serving/reconnect.ts';
import { type GatewayHandle, replicas, tokens, waitFor } from '../support/gateway.harness.ts';
import { freePort } from '../support/ports.ts';

const TIMINGS = { prompt_n: 3, prompt_ms: 1.5, predicted_n: 2, predicted_ms: 4.25 };

interface FakeOptions {
  /** Destroys a completion's socket, before any head, when it is not the socket's first request. */
  dropReused?: boolean;
  /** The ids its /v1/models lists (none: 404). */
  modelIds?: string[];
  port?: number;
}

/** A llama-server-like engine: /health, /metrics, /v1/models, completions with `timings`. */
async function fakeLlama(options: FakeOptions = {}) {
  const perSocket = new WeakMap<Socket, number>();
  const state = {
    modelIds: options.modelIds ?? null,
    dropped: 0,
    completions: 0,
    modelReads: 0,
    bodies: [] as Record<string, unknown>[],
  };
  const handle = (req: IncomingMessage, res: ServerResponse, body: string) => {
    const n = (perSocket.get(req.socket) ?? 0) + 1;
    perSocket.set(req.socket, n);
    if (req.url === '/health') return void res.end('{"status":"ok"}');
    if (req.url === '/metrics') {
      res.end(
        'vllm:kv_cache_usage_perc 0.1\nvllm:num_requests_running 0\nvllm:num_requests_waiting 0\n',
      );
      return;
    }
    if (req.url === '/v1/models' && state.modelIds) {
      state.modelReads++;
      const data = state.modelIds.map((id) => ({ id, object: 'model', owned_by: 'llamacpp' }));
      return void res.end(JSON.stringify({ object: 'list', data }));
    }
    if (req.method !== 'POST' || !req.url?.endsWith('completions')) {
      res.writeHead(404, { 'content-type': 'application/json' });
      return void res.end('{}');
    }
    if (options.dropReused && n > 1) {
      state.dropped++;
      return void req.socket.destroy();
    }
    state.completions++;
    const json = JSON.parse(body) as Record<string, unknown>;
    state.bodies.push(json);
    const chat = req.url === '/v1/chat/completions';
    const envelope = {
      id: 'cmpl-1',
      object: chat ? 'chat.completion.chunk' : 'text_completion',
      created: 1,
      model: state.modelIds?.[0] ?? 'fake',
      system_fingerprint: 'b1-x',
    };
    const usage = { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 };
    if (json.stream !== true) {
      res.writeHead(200, { 'content-type': 'application/json' });
      const choice = chat
        ? { index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }
        : { index: 0, text: 'ok', finish_reason: 'stop' };
      res.end(
        JSON.stringify({
          ...envelope,
          object: chat ? 'chat.completion' : 'text_completion',
          choices: [choice],
          usage,
          timings: TIMINGS,
        }),
      );
      return;
    }
    // As llama-server writes a stream: its `timings` go on the last chunk it sends.
    const includeUsage =
      (json.stream_options as { include_usage?: boolean } | undefined)?.include_usage === true;
    const delta = (content: string | null, finish: string | null) =>
      chat
        ? { index: 0, delta: content === null ? {} : { content }, finish_reason: finish }
        : { index: 0, text: content ?? '', finish_reason: finish };
    const chunks: Record<string, unknown>[] = [
      { ...envelope, choices: [delta('o', null)] },
      { ...envelope, choices: [delta('k', null)] },
      { ...envelope, choices: [delta(null, 'stop')] },
    ];
    if (includeUsage) chunks.push({ ...envelope, choices: [], usage });
    chunks[chunks.length - 1]!.timings = TIMINGS;
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const c of chunks) res.write(`data: ${JSON.stringify(c)}\n\n`);
    res.end('data: [DONE]\n\n');
  };
  const server: Server = createServer((req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => handle(req, res, Buffer.concat(parts).toString('utf8')));
  });
  await new Promise<void>((r) => server.listen(options.port ?? 0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const fake = {
    url: `http://127.0.0.1:${port}`,
    state,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
  closers.push(fake.close);
  return fake;
}

const closers: (() => Promise<void>)[] = [];
after(async () => {
  for (const close of closers.reverse()) await close();
});

async function gatewayFor(
  urls: string[],
  model: string | null,
  overrides: Partial<GatewayConfig> = {},
): Promise<GatewayHandle> {
  const gw = await startGateway({
    ...defaultConfig(),
    // The replica header names the address: the tests read the router by it.
    exposeReplicaAddresses: true,
    port: 0,
    logLevel: 'error',
    backends: urls.map((url) => ({ url, events: null, replay: null, model, apiKey: null })),
    ...overrides,
  });
  closers.push(() => gw.close());
  return gw;
}

const clientOf = (gw: GatewayHandle) =>
  new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });

const counter = async (gw: GatewayHandle, name: 'retries' | 'upstreamReconnects') =>
  (await gw.metrics[name].get()).values.reduce((n, v) => n + v.value, 0);

interface BackendJson {
  name: string;
  url: string;
  model: string | null;
  state: string;
}
async function backendsOf(gw: GatewayHandle): Promise<BackendJson[]> {
  const res = await fetch(`${gw.url}/router/backends`);
  return ((await res.json()) as { data: BackendJson[] }).data;
}

describe('a kept-alive connection closed under a request', () => {
  test('is a reset, a broken pipe or a closed socket on a reused connection, before any head', () => {
    const coded = (code: string, message = 'x') => Object.assign(new Error(message), { code });
    for (const error of [
      coded('ECONNRESET', 'read ECONNRESET'),
      coded('EPIPE', 'write EPIPE'),
      coded('UND_ERR_SOCKET', 'other side closed'),
      new Error('other side closed'),
      new Error('wrapped', { cause: coded('ECONNRESET') }),
    ]) {
      assert.ok(isClosedConnection(error), error.message);
      assert.ok(isKeepAliveRace({ error, reused: true, headSeen: false }), error.message);
      assert.ok(!isKeepAliveRace({ error, reused: false, headSeen: false }), 'a fresh one failed');
      assert.ok(!isKeepAliveRace({ error, reused: null, headSeen: false }), 'not known: no');
      assert.ok(!isKeepAliveRace({ error, reused: true, headSeen: true }), 'a head came');
    }
    for (const error of [
      coded('ECONNREFUSED'),
      coded('UND_ERR_HEADERS_TIMEOUT', 'Headers Timeout Error'),
      new Error('boom'),
      null,
      'ECONNRESET',
    ]) {
      assert.ok(!isKeepAliveRace({ error, reused: true, headSeen: false }), String(error));
    }
  });

  test('is sent again on a fresh connection to the same replica, which stays up and warm', async () => {
    const fakes = [await fakeLlama({ dropReused: true }), await fakeLlama({ dropReused: true })];
    const gw = await gatewayFor(
      fakes.map((f) => f.url),
      'fake',
      { index: 'approx', maxRetries: 1 },
    );
    const openai = clientOf(gw);
    const prompt = tokens(7, 64) as unknown as string;
    const served: string[] = [];
    for (let i = 0; i < 4; i++) {
      const { data, response } = await openai.completions
        .create({ model: 'fake', prompt, max_tokens: 2 })
        .withResponse();
      assert.equal(data.choices[0]?.text, 'ok');
      served.push(response.headers.get('x-kvroute-replica') ?? '');
    }
    const dropped = fakes.reduce((n, f) => n + f.state.dropped, 0);
    assert.ok(dropped >= 1, 'some request went out on a reused connection and was cut');
    assert.equal(await counter(gw, 'upstreamReconnects'), dropped, 'each cut sent again once');
    assert.equal(await counter(gw, 'retries'), 0, 'never retried on another replica');
    assert.equal(new Set(served).size, 1, `one replica served all: ${served.join(', ')}`);
    for (const b of await backendsOf(gw)) assert.equal(b.state, 'active', b.name);
    const replica = (await replicas(gw)).find((r) => r.name === served[0]);
    assert.ok(replica?.healthy, 'not marked down');
    assert.ok((replica?.indexedBlocks ?? 0) > 0, 'its cache record kept (not forgotten)');
  });
});

describe('a kept-alive connection closed under the P/D prefill leg', () => {
  test('is sent again on a fresh connection to the same prefill replica, kept up and warm', async () => {
    const prefill = [await fakeLlama({ dropReused: true }), await fakeLlama({ dropReused: true })];
    const decode = await fakeLlama();
    const gw = await startGateway({
      ...defaultConfig(),
      exposeReplicaAddresses: true,
      port: 0,
      logLevel: 'error',
      index: 'approx',
      maxRetries: 1,
      backends: [
        ...prefill.map((f) => ({ url: f.url, role: 'prefill' as const })),
        { url: decode.url, role: 'decode' as const },
      ].map((b) => ({ ...b, events: null, replay: null, model: 'fake', apiKey: null })),
    });
    closers.push(() => gw.close());
    const openai = clientOf(gw);
    const prompt = tokens(9, 64) as unknown as string;
    const servedBy: string[] = [];
    for (let i = 0; i < 4; i++) {
      const { data, response } = await openai.completions
        .create({ model: 'fake', prompt, max_tokens: 2 })
        .withResponse();
      assert.equal(data.choices[0]?.text, 'ok');
      servedBy.push(response.headers.get('x-kvroute-prefill-replica') ?? '');
    }
    const dropped = prefill.reduce((n, f) => n + f.state.dropped, 0);
    assert.ok(dropped >= 1, 'some prefill leg went out on a reused connection and was cut');
    assert.equal(await counter(gw, 'upstreamReconnects'), dropped, 'each cut sent again once');
    const legRetries = (await gw.metrics.registry
      .getSingleMetric('kvroute_gateway_pd_leg_retries_total')
      ?.get()) ?? { values: [] };
    assert.equal(
      legRetries.values.reduce((n, v) => n + v.value, 0),
      0,
      'never retried on another prefill replica',
    );
    assert.equal(new Set(servedBy).size, 1, `one prefill replica took all: ${servedBy.join(', ')}`);
    for (const b of await backendsOf(gw)) assert.equal(b.state, 'active', b.name);
    const replica = (await replicas(gw)).find((r) => r.name === servedBy[0]);
    assert.ok(replica?.healthy, 'not marked down');
    assert.ok((replica?.indexedBlocks ?? 0) > 0, 'its cache record kept (not forgotten)');
  });
});

describe('probes of a backend that has not answered yet', () => {
  test('back off to at most a second until its first answer, to 2 s after', () => {
    const delays: number[] = [];
    for (let d = 100, i = 0; i < 8; i++) delays.push((d = nextProbeDelayMs(d, false)));
    assert.deepEqual(delays, [200, 400, 800, 1000, 1000, 1000, 1000, 1000]);
    assert.equal(HEALTH_BACKOFF_FIRST_MAX_MS, 1000);
    assert.equal(nextProbeDelayMs(1600, true), HEALTH_BACKOFF_MAX_MS);
  });

  test('a refused backend is probed at least once a second, and reported up when it answers', async () => {
    const port = await freePort();
    const scheduled: number[] = [];
    let ups = 0;
    const checker = new HealthChecker(
      [{ replica: 0, url: `http://127.0.0.1:${port}` }],
      () => ups++,
      {
        onSchedule: (_r, delayMs) => scheduled.push(delayMs),
      },
    );
    closers.push(() => checker.close());
    checker.watch(0);
    await waitFor(() => scheduled.length >= 6, 'six probes scheduled');
    assert.equal(ups, 0);
    assert.ok(
      scheduled.every((d) => d <= HEALTH_BACKOFF_FIRST_MAX_MS),
      `delays ${scheduled.join(', ')}`,
    );
    assert.equal(scheduled.at(-1), HEALTH_BACKOFF_FIRST_MAX_MS, 'the cap reached');
    await fakeLlama({ port });
    await waitFor(() => ups === 1, 'reported up');
    assert.deepEqual(checker.watching, [], 'no longer probed');
  });
});

describe('readiness', () => {
  test('/ready is 503 while a model has no healthy backend, 200 once it has; /health stays 200', async () => {
    const port = await freePort();
    const gw = await gatewayFor([`http://127.0.0.1:${port}`], 'fake');
    const ready = await fetch(`${gw.url}/ready`);
    assert.equal(ready.status, 503);
    assert.deepEqual(await ready.json(), { status: 'not ready', models: ['fake'] });
    assert.equal((await fetch(`${gw.url}/health`)).status, 200, 'liveness is not readiness');
    await waitFor(
      async () => (await backendsOf(gw)).every((b) => b.state === 'down'),
      'the refused backend marked down',
    );
    await fakeLlama({ port });
    await waitFor(async () => (await fetch(`${gw.url}/ready`)).status === 200, '/ready 200');
    assert.deepEqual(
      (await backendsOf(gw)).map((b) => b.state),
      ['active'],
    );
    const r = await clientOf(gw).completions.create({ model: 'fake', prompt: 'hi', max_tokens: 1 });
    assert.equal(r.choices[0]?.text, 'ok');
  });
});

describe('a model id change', () => {
  test("keeps a replica whose entry names model= in that model's pool", async () => {
    const fake = await fakeLlama({ modelIds: ['/models/a.gguf'] });
    const gw = await gatewayFor([fake.url], 'llama');
    assert.deepEqual(
      (await backendsOf(gw)).map((b) => [b.model, b.state]),
      [['llama', 'active']],
    );
    fake.state.modelIds = ['/models/b.gguf'];
    const reads = fake.state.modelReads;
    // A model nobody serves makes the gateway read every backend's models again (at most once
    // a second): asked until it has.
    for (let i = 0; i < 100 && fake.state.modelReads === reads; i++) {
      await fetch(`${gw.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'nobody', prompt: 'hi', max_tokens: 1 }),
      });
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(fake.state.modelReads > reads, 'its models read again');
    assert.deepEqual(
      (await backendsOf(gw)).map((b) => [b.model, b.state]),
      [['llama', 'active']],
      'still in its pool, routed',
    );
    const openai = clientOf(gw);
    for (const model of ['llama', '/models/b.gguf']) {
      const r = await openai.completions.create({ model, prompt: 'hi', max_tokens: 1 });
      assert.equal(r.choices[0]?.text, 'ok', model);
    }
  });
});

describe("an engine's own response fields", () => {
  test('llama.cpp timings pass through streams, with and without usage, and whole answers', async () => {
    const fake = await fakeLlama({ modelIds: ['m'] });
    const gw = await gatewayFor([fake.url], 'm');
    const openai = clientOf(gw);
    const messages = [{ role: 'user' as const, content: 'hi' }];

    const plain: Record<string, unknown>[] = [];
    for await (const c of await openai.chat.completions.create({
      model: 'm',
      messages,
      stream: true,
    })) {
      plain.push(c as unknown as Record<string, unknown>);
    }
    const asked = fake.state.bodies.at(-1)?.stream_options;
    assert.deepEqual(asked, { include_usage: true }, 'the gateway asked for usage itself');
    assert.ok(
      plain.every((c) => c.usage === undefined),
      'the usage the client did not ask for is gone',
    );
    assert.ok(
      plain.every((c) => (c.choices as unknown[]).length > 0),
      'no empty-choices chunk',
    );
    const last = plain.at(-1)!;
    assert.deepEqual(last.timings, TIMINGS, 'timings on the last content chunk');
    assert.equal((last.choices as { finish_reason: string }[])[0]?.finish_reason, 'stop');

    const withUsage: Record<string, unknown>[] = [];
    for await (const c of await openai.chat.completions.create({
      model: 'm',
      messages,
      stream: true,
      stream_options: { include_usage: true },
    })) {
      withUsage.push(c as unknown as Record<string, unknown>);
    }
    const usageChunk = withUsage.at(-1)!;
    assert.equal((usageChunk.choices as unknown[]).length, 0);
    assert.deepEqual(usageChunk.usage, { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 });
    assert.deepEqual(usageChunk.timings, TIMINGS, 'asked: everything passes as the engine sent it');

    const whole = await openai.chat.completions.create({ model: 'm', messages });
    assert.deepEqual((whole as unknown as { timings: unknown }).timings, TIMINGS);
  });
});
