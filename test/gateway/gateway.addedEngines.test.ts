/**
 * Backends added at run time (`POST /router/backends`) whose engines send no vLLM load report
 * take traffic: a llama-server without `--metrics` (load from `/slots`) and a plain
 * OpenAI-compatible server with no `/metrics` and no `/health` (routed on the router's ledger,
 * its health from `/v1/models`). Before the engine dialects both stayed `starting` for good.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import OpenAI from 'openai';
import { defaultConfig } from '../../src/serving/config.ts';
import { startGateway } from '../../src/gateway/gateway.ts';
import { waitFor } from '../support/gateway.harness.ts';
import { startFakeLlama } from '../support/fakeLlamaServer.ts';

const ADMIN = 'sk-admin';
const closers: (() => Promise<void>)[] = [];
after(async () => {
  for (const close of closers.reverse()) await close();
});

/** An OpenAI-compatible server with only `/v1/models` and chat completions (no metrics, no health). */
async function startPlainOpenAi(): Promise<{
  url: string;
  served: () => number;
  close(): Promise<void>;
}> {
  let served = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const json = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      if (req.method === 'GET' && req.url === '/v1/models') {
        json(200, { object: 'list', data: [{ id: 'tiny', object: 'model', owned_by: 'plain' }] });
      } else if (req.method === 'POST' && req.url === '/v1/chat/completions') {
        served++;
        json(200, {
          id: `chatcmpl-${served}`,
          object: 'chat.completion',
          created: 0,
          model: 'tiny',
          choices: [
            { index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' },
          ],
          usage: { prompt_tokens: 8, completion_tokens: 1, total_tokens: 9 },
        });
      } else json(404, { error: { message: 'Not Found', type: 'NotFoundError', code: 404 } });
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    served: () => served,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

test('engines with no vLLM load report, added at run time, take traffic', async () => {
  const first = await startFakeLlama({ metrics: true });
  const slotsOnly = await startFakeLlama();
  const plain = await startPlainOpenAi();
  for (const s of [first, slotsOnly, plain]) closers.push(() => s.close());
  const gw = await startGateway({
    ...defaultConfig(),
    port: 0,
    scrapeMs: 20,
    policy: 'round-robin',
    adminKey: ADMIN,
    // The replica header names the address: the test reads the router by it.
    exposeReplicaAddresses: true,
    backends: [{ url: first.url, events: null, replay: null, model: 'tiny', apiKey: null }],
  });
  closers.push(() => gw.close());

  for (const url of [slotsOnly.url, plain.url]) {
    const res = await fetch(`${gw.url}/router/backends`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN}` },
      body: JSON.stringify({ url, model: 'tiny' }),
    });
    assert.ok(res.status < 300, `POST /router/backends ${url}: ${res.status} ${await res.text()}`);
  }
  const engines = await waitFor(async () => {
    const res = await fetch(`${gw.url}/router/replicas`, {
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    const json = (await res.json()) as { replicas: { name: string; engine: string | null }[] };
    return json.replicas.length === 3 && json.replicas.every((r) => r.engine !== null) && json;
  }, 'all three backends placed, their engines known');
  const kinds = new Map(engines.replicas.map((r) => [r.name, r.engine]));
  assert.equal(kinds.get(new URL(slotsOnly.url).host), 'llamacpp');
  assert.equal(kinds.get(new URL(plain.url).host), 'openai');

  const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  const seen = new Set<string>();
  // Round robin over three healthy replicas: a bounded number of requests reaches each.
  for (let i = 0; i < 30 && seen.size < 3; i++) {
    const { data, response } = await client.chat.completions
      .create({ model: 'tiny', messages: [{ role: 'user', content: `hello ${i}` }], max_tokens: 1 })
      .withResponse();
    assert.ok(data.choices[0]);
    const replica = response.headers.get('x-kvroute-replica');
    if (replica) seen.add(replica);
  }
  assert.ok(
    seen.has(new URL(slotsOnly.url).host),
    `the slots-only llama-server served: ${[...seen]}`,
  );
  assert.ok(seen.has(new URL(plain.url).host), `the plain OpenAI server served: ${[...seen]}`);
  assert.ok(plain.served() > 0);
  assert.ok(slotsOnly.served.length > 0);
});
