/**
 * The proxy's failure paths against real HTTP backends on 127.0.0.1 that misbehave on purpose:
 * a non-streamed answer cut mid-body (not retried: bytes reached the client, which sees the
 * cut), `max-retries` (a backend that resets before any byte is retried on another, at most
 * max-retries times; a reset on a reused connection is first sent once more on a fresh one to
 * the same backend), and the 503 "no backend answered after N attempts" once all have failed.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, test } from 'node:test';
import { defaultConfig, type GatewayConfig } from '../../src/serving/config.ts';
import { startGateway } from '../../src/gateway/gateway.ts';
import { type GatewayHandle, within } from '../support/gateway.harness.ts';

type Behaviour = 'answer' | 'reset' | 'cut-body';

const ANSWER = JSON.stringify({
  id: 'cmpl-1',
  object: 'text_completion',
  created: 1,
  model: 'fake',
  choices: [{ index: 0, text: 'x'.repeat(20_000), finish_reason: 'length' }],
  usage: { prompt_tokens: 2, completion_tokens: 1, total_tokens: 3 },
});

/** A backend: /health and /metrics answer; a completion is answered, reset, or cut mid-body. */
async function fakeBackend(behaviour: Behaviour) {
  const completions: number[] = [];
  const server: Server = createServer((req, res) => {
    if (req.url === '/metrics') {
      res.end(
        'vllm:kv_cache_usage_perc 0.1\nvllm:num_requests_running 0\nvllm:num_requests_waiting 0\n',
      );
      return;
    }
    if (req.url === '/health') return void res.end();
    if (req.method !== 'POST' || req.url !== '/v1/completions') {
      // /v1/models, /tokenize and the like: not this backend's business here.
      res.writeHead(404, { 'content-type': 'application/json' });
      return void res.end('{}');
    }
    req.resume();
    req.on('end', () => {
      completions.push(Date.now());
      if (behaviour === 'reset') return void req.socket.destroy();
      const body = Buffer.from(ANSWER);
      res.writeHead(200, {
        'content-type': 'application/json',
        'content-length': String(body.length),
      });
      if (behaviour === 'answer') return void res.end(body);
      // Half the body, then the connection goes.
      res.write(body.subarray(0, body.length >> 1), () => res.socket?.destroy());
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    completions,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const closers: (() => Promise<void>)[] = [];
after(async () => {
  for (const close of closers.reverse()) await close();
});

async function fleet(behaviours: Behaviour[], overrides: Partial<GatewayConfig> = {}) {
  const backends = await Promise.all(behaviours.map(fakeBackend));
  for (const b of backends) closers.push(b.close);
  const gw: GatewayHandle = await startGateway({
    ...defaultConfig(),
    port: 0,
    backends: backends.map((b) => ({
      url: b.url,
      events: null,
      replay: null,
      model: 'fake',
      apiKey: null,
    })),
    ...overrides,
  });
  closers.push(() => gw.close());
  return { gw, backends, attempts: () => backends.reduce((n, b) => n + b.completions.length, 0) };
}

const counter = async (
  gw: GatewayHandle,
  name: 'retries' | 'brokenStreams' | 'upstreamReconnects',
) => (await gw.metrics[name].get()).values.reduce((n, v) => n + v.value, 0);

function complete(gw: GatewayHandle) {
  return fetch(`${gw.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'fake', prompt: 'hi', max_tokens: 1 }),
  });
}

describe('proxy failures', () => {
  test('a non-streamed answer cut mid-body reaches the client cut, and is not retried', async () => {
    const { gw, attempts } = await fleet(['cut-body', 'cut-body'], { maxRetries: 3 });
    const res = await complete(gw);
    assert.equal(res.status, 200, 'the head had gone out before the cut');
    const body = await within(
      120_000,
      res.text().then(
        (text) => ({ text }),
        (err: Error) => ({ err }),
      ),
      'the cut body',
    );
    assert.ok('err' in body, 'the client sees the cut, not a short answer passed as whole');
    assert.equal(attempts(), 1, 'bytes reached the client: no second attempt');
    assert.equal(await counter(gw, 'retries'), 0);
    assert.equal(await counter(gw, 'brokenStreams'), 1);
    assert.equal(gw.router.snapshot().inFlightRequests, 0, 'the ledger is released');
  });

  test('max-retries: a reset before any byte is retried on another backend', async () => {
    // Round robin: of two requests one is sent to the resetting backend first, whichever it is.
    const { gw, backends } = await fleet(['reset', 'answer'], {
      maxRetries: 1,
      policy: 'round-robin',
    });
    for (let i = 0; i < 2; i++) {
      const res = await complete(gw);
      const text = await res.text();
      assert.equal(res.status, 200, text);
      assert.equal(JSON.parse(text).choices[0].text.length, 20_000, 'the whole answer');
    }
    const [resetting, answering] = backends as [
      (typeof backends)[number],
      (typeof backends)[number],
    ];
    // Its /health still answers, so it may be taken back up between the two requests.
    assert.ok(resetting.completions.length >= 1, 'the resetting backend was tried');
    assert.equal(answering.completions.length, 2, 'one answer each, retries included');
    // A reset on a reused connection (the one its /v1/models was read on) is first sent once
    // more on a fresh connection to the same backend: a retry elsewhere per fresh reset.
    assert.equal(
      (await counter(gw, 'retries')) + (await counter(gw, 'upstreamReconnects')),
      resetting.completions.length,
      'a retry or a reconnect per reset',
    );
    assert.equal(gw.router.snapshot().inFlightRequests, 0);
  });

  test('all backends failing: 503 "no backend answered after N attempts", N = max-retries + 1', async () => {
    for (const maxRetries of [0, 2]) {
      const { gw, attempts } = await fleet(['reset', 'reset', 'reset'], { maxRetries });
      const res = await complete(gw);
      assert.equal(res.status, 503);
      const json = (await res.json()) as { error: { message: string; code: number } };
      assert.equal(json.error.code, 503);
      assert.match(
        json.error.message,
        new RegExp(`^no backend answered after ${maxRetries + 1} attempts: `),
      );
      // An attempt on a reused connection is sent once more on a fresh one, no more.
      assert.equal(
        attempts(),
        maxRetries + 1 + (await counter(gw, 'upstreamReconnects')),
        'one request per attempt (and its reconnect), no more',
      );
      assert.ok((await counter(gw, 'upstreamReconnects')) <= maxRetries + 1);
      assert.equal(await counter(gw, 'retries'), maxRetries);
      assert.equal(gw.router.snapshot().inFlightRequests, 0);
    }
  });
});
