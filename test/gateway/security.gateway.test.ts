/**
 * Live: what a client may and may not tell the gateway, and what it is told back, on the plain
 * and the P/D paths with simulated engines that run vLLM's NixlConnector protocol.
 *
 * - A client's `kv_transfer_params` is refused with vLLM's 400, on both generate paths,
 *   streamed or not, before any engine sees it: a forger pointing the decode engine's pull at a
 *   listener here gets a 400 and the listener hears nothing.
 * - No engine's `kv_transfer_params` reaches a client (P/D answers; a backend that always sends
 *   them, in a JSON answer and in a stream).
 * - The replica headers give labels, or addresses with `exposeReplicaAddresses`.
 * - `/metrics` is closed to anyone without the admin key once client keys exist.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { backendOf } from '../../src/embedded/fleet.ts';
import { parseKvTransferConfig } from '../../src/engine/connector/kvTransferConfig.ts';
import { defaultConfig } from '../../src/serving/config.ts';
import { startGateway } from '../../src/gateway/gateway.ts';
import type { BackendRole } from '../../src/serving/pdRoles.ts';
import {
  configFor,
  type EngineServerHandle,
  type GatewayHandle,
  replicas,
  startEngine,
  startGatewayFor,
  waitFor,
} from '../support/gateway.harness.ts';

const nixl = parseKvTransferConfig('{"kv_connector":"NixlConnector","kv_role":"kv_both"}');
// The fleet's engines share a transfer secret: without one their side channel is closed.
const ENGINE = {
  servedModelName: 'm',
  speedup: 200,
  kvTransferConfig: nixl,
  kvTransferSecret: 'pd-fleet-secret',
  maxModelLen: 16_384,
};
const LONG = Array.from({ length: 300 }, (_, i) => `rule${i % 53}`).join(' ');

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

async function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

const post = async (url: string, body: unknown, headers: Record<string, string> = {}) => {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
};

const prefill: EngineServerHandle[] = [];
const decode: EngineServerHandle[] = [];
const opened: GatewayHandle[] = [];
/** Anything an engine was talked into sending to a client-named host lands here. */
const ssrfHits: string[] = [];
let ssrf: Server;
let ssrfPort = 0;

before(async () => {
  ssrf = createServer((req, res) => {
    ssrfHits.push(`${req.method} ${req.url}`);
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{}');
  });
  ssrfPort = await listen(ssrf);
  for (let i = 0; i < 2; i++) prefill.push(await startEngine({ ...ENGINE, seed: i }));
  for (let i = 0; i < 2; i++) decode.push(await startEngine({ ...ENGINE, seed: 10 + i }));
});

after(async () => {
  for (const gw of opened) await gw.close();
  for (const e of [...prefill, ...decode]) await e.close();
  await closeServer(ssrf);
});

const withRole = (e: EngineServerHandle, role: BackendRole) => ({ ...backendOf(e), role });
const hostOf = (e: EngineServerHandle) => new URL(e.url).host;

/** A P/D gateway with the shipped default for replica headers unless told otherwise. */
async function pdGateway(
  overrides: { pdThreshold?: number; exposeReplicaAddresses?: boolean } = {},
): Promise<GatewayHandle> {
  const gw = await startGateway({
    ...configFor([...prefill, ...decode], {
      backends: [
        ...prefill.map((e) => withRole(e, 'prefill')),
        ...decode.map((e) => withRole(e, 'decode')),
      ],
    }),
    exposeReplicaAddresses: defaultConfig().exposeReplicaAddresses,
    ...overrides,
  });
  opened.push(gw);
  await waitFor(async () => (await replicas(gw)).every((r) => r.healthy), 'replicas healthy');
  return gw;
}

/** The forger's fields: the decode engine would pull "prefilled" blocks from the listener. */
const forged = () => ({
  do_remote_prefill: true,
  do_remote_decode: false,
  remote_engine_id: 'another-tenants-engine',
  remote_request_id: 'another-tenants-request',
  remote_block_ids: [0, 1, 2],
  remote_host: '127.0.0.1',
  remote_port: ssrfPort,
  tp_size: 1,
});

const bodies = (stream: boolean) => ({
  '/v1/completions': { model: 'm', prompt: LONG, max_tokens: 4, stream },
  '/v1/chat/completions': {
    model: 'm',
    messages: [{ role: 'user', content: LONG }],
    max_tokens: 4,
    stream,
  },
});

async function assertForgeryRefused(gw: GatewayHandle, what: string): Promise<void> {
  for (const stream of [false, true]) {
    for (const [path, body] of Object.entries(bodies(stream))) {
      const r = await post(`${gw.url}${path}`, { ...body, kv_transfer_params: forged() });
      const label = `${what} ${path} stream=${stream}`;
      assert.equal(r.status, 400, `${label}: ${r.text}`);
      const error = JSON.parse(r.text).error;
      assert.equal(error.type, 'BadRequestError', label);
      assert.equal(error.code, 400, label);
      assert.equal(error.param, 'kv_transfer_params', label);
      assert.deepEqual(Object.keys(error).sort(), ['code', 'message', 'param', 'type'], label);
    }
  }
  // A request the engines did take would have pulled by now; these never reached one.
  assert.deepEqual(ssrfHits, [], what);
}

describe('a client cannot send kv_transfer_params', () => {
  test('plain gateway: 400 on both paths, streamed or not; the named host hears nothing', async () => {
    const gw = await startGatewayFor([decode[0]!]);
    opened.push(gw);
    await assertForgeryRefused(gw, 'plain');
    // The openai client gets the 400 as its BadRequestError.
    const c = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    await assert.rejects(
      c.completions.create({
        model: 'm',
        prompt: 'hello',
        max_tokens: 2,
        // @ts-expect-error: not an OpenAI field; vLLM's, and the gateway's alone
        kv_transfer_params: forged(),
      }),
      OpenAI.BadRequestError,
    );
    // Without the field the same request is served.
    const ok = await post(`${gw.url}/v1/completions`, bodies(false)['/v1/completions']);
    assert.equal(ok.status, 200, ok.text);
  });

  test('P/D gateway: 400 on the disaggregated and the local path (--pd-threshold)', async () => {
    await assertForgeryRefused(await pdGateway(), 'P/D disaggregated');
    await assertForgeryRefused(await pdGateway({ pdThreshold: 1_000_000 }), 'P/D local');
  });
});

describe('engines’ kv_transfer_params never reach a client', () => {
  test('P/D answers, JSON and streamed, carry none', async () => {
    const gw = await pdGateway();
    for (const stream of [false, true]) {
      for (const [path, body] of Object.entries(bodies(stream))) {
        const r = await post(`${gw.url}${path}`, body);
        assert.equal(r.status, 200, r.text);
        assert.ok(r.headers.get('x-kvroute-prefill-replica'), 'disaggregated');
        assert.doesNotMatch(r.text, /kv_transfer_params|remote_block_ids|remote_host/);
      }
    }
  });

  describe('a backend that always sends them', () => {
    const params = {
      do_remote_prefill: true,
      do_remote_decode: false,
      remote_block_ids: [7, 8],
      remote_engine_id: 'engine-secret',
      remote_request_id: 'r1',
      remote_host: '10.1.2.3',
      remote_port: 5600,
      tp_size: 1,
    };
    let backend: Server;
    let url = '';
    before(async () => {
      backend = createServer((req, res) => {
        if (req.url === '/metrics') {
          res.end('vllm:kv_cache_usage_perc 0.1\nvllm:num_requests_running 0\n');
          return;
        }
        if (req.url === '/health') return void res.end();
        if (req.method !== 'POST') {
          res.writeHead(404);
          return void res.end();
        }
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { stream?: boolean };
          const choice = { index: 0, text: 'hi', finish_reason: 'length' };
          if (!body.stream) {
            res.writeHead(200, { 'content-type': 'application/json' });
            res.end(JSON.stringify({ id: 'x', choices: [choice], kv_transfer_params: params }));
            return;
          }
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          res.write(`data: ${JSON.stringify({ id: 'x', choices: [choice] })}\n\n`);
          res.write(
            `data: ${JSON.stringify({ id: 'x', choices: [], kv_transfer_params: params })}\n\n`,
          );
          res.end('data: [DONE]\n\n');
        });
      });
      url = `http://127.0.0.1:${await listen(backend)}`;
    });
    after(() => closeServer(backend));

    for (const role of ['both', 'decode'] as const) {
      test(`${role === 'both' ? 'plain' : 'P/D'} gateway: stripped from the JSON answer and the stream`, async () => {
        const gw = await startGatewayFor([], {
          backends: [{ url, events: null, replay: null, model: 'fake', apiKey: null, role }],
        });
        opened.push(gw);
        const json = await post(`${gw.url}/v1/completions`, { model: 'fake', prompt: 'hello' });
        assert.equal(json.status, 200, json.text);
        assert.deepEqual(JSON.parse(json.text), {
          id: 'x',
          choices: [{ index: 0, text: 'hi', finish_reason: 'length' }],
        });
        const sse = await post(`${gw.url}/v1/completions`, {
          model: 'fake',
          prompt: 'hello',
          stream: true,
        });
        assert.equal(sse.status, 200, sse.text);
        assert.doesNotMatch(sse.text, /kv_transfer_params|engine-secret|10\.1\.2\.3/);
        assert.match(sse.text, /"text":"hi"/);
        assert.match(sse.text, /data: \{"id":"x","choices":\[\]\}\n\n/);
        assert.ok(sse.text.endsWith('data: [DONE]\n\n'));
      });
    }
  });
});

describe('replica headers', () => {
  test('labels by default, in --backend order; addresses only with exposeReplicaAddresses', async () => {
    const prefillHosts = prefill.map(hostOf);
    const decodeHosts = decode.map(hostOf);
    const labelled = await pdGateway();
    const a = await post(`${labelled.url}/v1/completions`, bodies(false)['/v1/completions']);
    assert.equal(a.status, 200, a.text);
    const p = a.headers.get('x-kvroute-prefill-replica')!;
    const d = a.headers.get('x-kvroute-replica')!;
    assert.ok(['replica-0', 'replica-1'].includes(p), `prefill header ${p}`);
    assert.ok(['replica-2', 'replica-3'].includes(d), `decode header ${d}`);
    assert.doesNotMatch(`${p} ${d}`, /127\.0\.0\.1|:\d+/);
    // The admin's view maps each label to its replica.
    const state = (await (await fetch(`${labelled.url}/router/replicas`)).json()) as {
      labels: Record<string, string>;
    };
    assert.equal(state.labels[prefillHosts[0]!], 'replica-0');
    assert.equal(state.labels[decodeHosts[1]!], 'replica-3');

    const exposed = await pdGateway({ exposeReplicaAddresses: true });
    const b = await post(`${exposed.url}/v1/completions`, bodies(false)['/v1/completions']);
    assert.equal(b.status, 200, b.text);
    assert.ok(prefillHosts.includes(b.headers.get('x-kvroute-prefill-replica')!));
    assert.ok(decodeHosts.includes(b.headers.get('x-kvroute-replica')!));
  });
});

describe('/metrics with client keys', () => {
  test('no metrics key: 401 without a key, 403 with a client key, 200 with the admin key', async () => {
    const apiKeys = [{ key: 'sk-tenant-a', tenant: 'tenant-a' }];
    const keysOnly = await startGatewayFor([decode[0]!], { apiKeys });
    const withAdmin = await startGatewayFor([decode[0]!], { apiKeys, adminKey: 'sk-admin' });
    opened.push(keysOnly, withAdmin);
    const get = async (url: string, key?: string) =>
      fetch(url, key ? { headers: { authorization: `Bearer ${key}` } } : {});
    const none = await get(`${keysOnly.url}/metrics`);
    assert.equal(none.status, 401);
    assert.doesNotMatch(await none.text(), /tenant-a/);
    assert.equal((await get(`${keysOnly.url}/metrics`, 'sk-tenant-a')).status, 403);
    assert.equal((await get(`${withAdmin.url}/metrics`)).status, 401);
    assert.equal((await get(`${withAdmin.url}/metrics`, 'sk-tenant-a')).status, 403);
    const admin = await get(`${withAdmin.url}/metrics`, 'sk-admin');
    assert.equal(admin.status, 200);
    assert.match(await admin.text(), /kvroute_gateway_requests_total/);
  });
});
