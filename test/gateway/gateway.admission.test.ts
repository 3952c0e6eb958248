/**
 * Admission control through the gateway, against a backend that records what it was sent and
 * answers when told: per-tenant limits (429 with Retry-After and a rate_limit_exceeded body while
 * another tenant is served), concurrency, the fleet-wide queue bound, priority classes written
 * into the body, and the latency metrics that follow.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { applyConfigDoc, defaultConfig, type GatewayConfig } from '../../src/serving/config.ts';
import { type GatewayHandle, startGateway } from '../../src/gateway/gateway.ts';
import { complete, waitFor } from '../support/gateway.harness.ts';

const COMPLETION = JSON.stringify({
  id: 'cmpl-1',
  object: 'text_completion',
  created: 0,
  model: 'fake',
  choices: [{ index: 0, text: ' ok', finish_reason: 'length', logprobs: null }],
  usage: { prompt_tokens: 4, completion_tokens: 1, total_tokens: 5 },
});

/** A backend that records request bodies; with `hold` on, answers only when released. */
class RecordingBackend {
  readonly bodies: Record<string, unknown>[] = [];
  hold = false;
  readonly #waiting: (() => void)[] = [];
  server: Server = createServer((req, res) => {
    if (req.url === '/metrics') {
      res.end(
        'vllm:kv_cache_usage_perc 0.1\nvllm:num_requests_running 0\nvllm:num_requests_waiting 0\n',
      );
      return;
    }
    if (req.url === '/health') return void res.end();
    if (!req.url?.startsWith('/v1/c')) {
      // No /v1/models or /tokenize here: the gateway learns the model from its config.
      res.writeHead(404).end();
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      this.bodies.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
      const answer = () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(COMPLETION);
      };
      if (this.hold) this.#waiting.push(answer);
      else answer();
    });
  });

  get held(): number {
    return this.#waiting.length;
  }

  releaseAll(): void {
    for (const answer of this.#waiting.splice(0)) answer();
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    this.releaseAll();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

async function gatewayOver(backend: RecordingBackend, doc: object): Promise<GatewayHandle> {
  const url = await backend.listen();
  const config: GatewayConfig = applyConfigDoc(doc, {
    ...defaultConfig(),
    port: 0,
    index: 'approx',
    backends: [{ url, events: null, replay: null, model: 'fake', apiKey: null }],
  });
  return startGateway(config);
}

const as = (tenant: string) => ({ 'x-kvroute-tenant': tenant });
const prompt = { model: 'fake', prompt: [1, 2, 3, 4], max_tokens: 1 };

async function metricsText(gw: GatewayHandle): Promise<string> {
  return (await fetch(`${gw.url}/metrics`)).text();
}

describe('tenant limits and priority classes', () => {
  const backend = new RecordingBackend();
  let gw: GatewayHandle;
  before(async () => {
    gw = await gatewayOver(backend, {
      'priority-classes': { interactive: -5, batch: 10 },
      tenants: {
        // 1 request/s with a burst of 2: a test needs minutes to refill it past a third.
        acme: { limits: { 'requests-per-second': 0.01, burst: 2 } },
        globex: { 'priority-class': 'batch' },
      },
    });
  });
  after(async () => {
    await gw.close();
    await backend.close();
  });

  test('a tenant over its rate gets 429 with Retry-After while another tenant is served', async () => {
    assert.equal((await complete(gw.url, prompt, as('acme'))).status, 200);
    assert.equal((await complete(gw.url, prompt, as('acme'))).status, 200);
    const sent = backend.bodies.length;
    const res = await fetch(`${gw.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...as('acme') },
      body: JSON.stringify(prompt),
    });
    assert.equal(res.status, 429);
    const retryAfterS = Number(res.headers.get('retry-after'));
    assert.ok(retryAfterS >= 1, `Retry-After ${res.headers.get('retry-after')}`);
    const body = (await res.json()) as { error: Record<string, unknown> };
    assert.equal(body.error.type, 'rate_limit_exceeded');
    assert.equal(body.error.param, 'requests_per_second');
    assert.equal(body.error.code, 429);
    assert.match(String(body.error.message), /acme/);
    assert.equal(backend.bodies.length, sent, 'a refused request never reaches a backend');

    for (let i = 0; i < 5; i++) {
      assert.equal((await complete(gw.url, prompt, as('globex'))).status, 200);
      assert.equal((await complete(gw.url, prompt)).status, 200, 'no tenant: no limit');
    }
  });

  test('the openai client sees a RateLimitError', async () => {
    const client = new OpenAI({
      baseURL: `${gw.url}/v1`,
      apiKey: 'unused',
      maxRetries: 0,
      defaultHeaders: as('acme'),
    });
    await assert.rejects(
      client.completions.create({ model: 'fake', prompt: 'hello', max_tokens: 1 }),
      (err: unknown) => err instanceof OpenAI.RateLimitError && err.status === 429,
    );
  });

  test("a tenant's priority class is written in only when the client gave none", async () => {
    backend.bodies.length = 0;
    await complete(gw.url, prompt, as('globex'));
    await complete(gw.url, { ...prompt, priority: -3 }, as('globex'));
    await complete(gw.url, prompt);
    assert.equal(backend.bodies[0]!.priority, 10);
    assert.deepEqual(backend.bodies[0]!.prompt, prompt.prompt, 'the rest goes through as sent');
    assert.equal(backend.bodies[1]!.priority, -3);
    assert.equal('priority' in backend.bodies[2]!, false);
    const bad = await complete(gw.url, { ...prompt, priority: 'high' }, as('globex'));
    assert.equal(bad.status, 400);
    assert.equal(bad.json?.error?.param, 'priority');
  });

  test('metrics: requests by status, rejections by limit, latency histograms, process', async () => {
    const text = await metricsText(gw);
    assert.match(
      text,
      /kvroute_gateway_requests_total\{endpoint="completions",status="429",model="fake",tenant="acme"\} [1-9]/,
    );
    assert.match(
      text,
      /kvroute_gateway_requests_total\{endpoint="completions",status="200",model="fake",tenant="none"\} [1-9]/,
    );
    assert.match(text, /kvroute_gateway_requests_total\{[^}]*status="400"[^}]*\} 1/);
    assert.match(
      text,
      /kvroute_gateway_rejected_total\{limit="requests_per_second",tenant="acme"\} [1-9]/,
    );
    assert.match(text, /kvroute_gateway_e2e_seconds_count\{model="fake",tenant="globex"\} [1-9]/);
    assert.match(
      text,
      /kvroute_gateway_pre_upstream_seconds_count\{model="fake",tenant="globex"\} [1-9]/,
    );
    assert.match(text, /kvroute_gateway_route_decision_seconds_count\{model="fake"\} [1-9]/);
    assert.match(
      text,
      /kvroute_gateway_ttft_seconds_bucket\{le="[^"]+",model="fake",tenant="none",replica="/,
    );
    assert.match(text, /^process_cpu_seconds_total /m);
    assert.match(text, /^nodejs_eventloop_lag_seconds /m);
  });

  test('an unconfigured tenant is labelled other, not by its name', async () => {
    await complete(gw.url, prompt, as('someone-unlisted'));
    const text = await metricsText(gw);
    assert.doesNotMatch(text, /someone-unlisted/);
    assert.match(text, /kvroute_gateway_requests_total\{[^}]*tenant="other"\} [1-9]/);
  });
});

describe('concurrency limit and the fleet queue bound', () => {
  const backend = new RecordingBackend();
  let gw: GatewayHandle;
  before(async () => {
    gw = await gatewayOver(backend, {
      // 1 ms of modelled prefill per token: 4 queued prompt tokens are 4 ms.
      'max-queue-ms': 6,
      'prefill-us-per-token': 1000,
      tenants: { acme: { limits: { 'concurrent-requests': 1 } } },
    });
  });
  after(async () => {
    await gw.close();
    await backend.close();
  });

  test('a second request in flight for a tenant limited to one is refused', async () => {
    backend.hold = true;
    const first = complete(gw.url, prompt, as('acme'));
    await waitFor(() => backend.held === 1, 'the first request to reach the backend');
    const second = await complete(gw.url, prompt, as('acme'));
    assert.equal(second.status, 429);
    assert.equal(second.json?.error?.param, 'concurrent_requests');
    backend.hold = false;
    backend.releaseAll();
    assert.equal((await first).status, 200);
    assert.equal((await complete(gw.url, prompt, as('acme'))).status, 200, 'the slot came back');
  });

  test('past max-queue-ms of queued prefill everywhere, new requests get 429', async () => {
    backend.hold = true;
    const first = complete(gw.url, prompt);
    await waitFor(() => backend.held === 1, 'the first request to reach the backend');
    // 4 tokens queued = 4 ms: still under 6 ms, so one more is admitted.
    const second = complete(gw.url, prompt);
    await waitFor(() => backend.held === 2, 'the second request to reach the backend');
    const third = await complete(gw.url, prompt);
    assert.equal(third.status, 429);
    assert.equal(third.json?.error?.param, 'max_queue_ms');
    assert.match(third.json?.error?.message ?? '', /overloaded/);
    backend.hold = false;
    backend.releaseAll();
    assert.equal((await first).status, 200);
    assert.equal((await second).status, 200);
    assert.equal((await complete(gw.url, prompt)).status, 200, 'the queue drained');
  });
});

describe('the TTFT bound after routing', () => {
  const backend = new RecordingBackend();
  let gw: GatewayHandle;
  before(async () => {
    gw = await gatewayOver(backend, {
      // 1 ms of modelled prefill per token: a 4-token prompt alone is 4 ms, behind one more 8.
      'max-ttft-ms': 6,
      'prefill-us-per-token': 1000,
    });
  });
  after(async () => {
    await gw.close();
    await backend.close();
  });

  test('a request that would wait past max-ttft-ms where it was routed gets 429; its route is undone', async () => {
    backend.hold = true;
    const first = complete(gw.url, prompt);
    await waitFor(() => backend.held === 1, 'the first request to reach the backend');
    const second = await complete(gw.url, prompt);
    assert.equal(second.status, 429);
    assert.equal(second.json?.error?.param, 'max_ttft_ms');
    assert.match(second.json?.error?.message ?? '', /about 8 ms for its first token/);
    assert.equal(backend.held, 1, 'the refused request never reached the backend');
    const replicas = (await (await fetch(`${gw.url}/router/replicas`)).json()) as {
      replicas: { queuedPromptTokens: number }[];
    };
    assert.equal(replicas.replicas[0]?.queuedPromptTokens, 4, 'only the first one is queued');
    assert.match(await metricsText(gw), /limit="max_ttft_ms"[^\n]* 1\n/);
    backend.hold = false;
    backend.releaseAll();
    assert.equal((await first).status, 200);
    assert.equal((await complete(gw.url, prompt)).status, 200, 'alone again, it fits');
  });
});
