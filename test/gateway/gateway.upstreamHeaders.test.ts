/**
 * What the gateway sends upstream and back, against a backend that checks its key as vLLM's
 * `--api-key` does (every `/v1` path needs `Authorization: Bearer KEY`, 401 otherwise): a real
 * HTTP server on 127.0.0.1 in front of a real `kvroute engine`, recording every request's headers.
 * - a backend's configured `api-key` goes upstream as `Authorization: Bearer`, in place of the
 *   client's, on the gateway's own requests (/v1/models) as on the proxied ones;
 * - a client's key that the gateway itself checked is never forwarded (it is the gateway's);
 *   without client keys, the client's Authorization goes through (the backend's to check);
 * - hop-by-hop headers (RFC 9110 section 7.6.1) are dropped both ways: the fixed list and any
 *   header the Connection field names.
 */
import assert from 'node:assert/strict';
import {
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type Server,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { request as undiciRequest } from 'undici';
import {
  type EngineServerHandle,
  type GatewayHandle,
  startEngines,
  startGatewayFor,
  tokens,
} from '../support/gateway.harness.ts';

const MODEL = 'llama-3.3-70b';
const BACKEND_KEY = 'sk-backend-only';
const CLIENT_KEY = 'sk-client-of-the-gateway';

interface Seen {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  status: number;
}

/**
 * A backend that checks `key` on `/v1` paths (null: checks nothing), then forwards to `engine`
 * and answers with the engine's response plus hop-by-hop headers of its own.
 */
async function keyedBackend(engine: EngineServerHandle, key: string | null) {
  const seen: Seen[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const path = req.url ?? '/';
      const entry: Seen = { method: req.method ?? '', path, headers: req.headers, status: 0 };
      seen.push(entry);
      if (key !== null && path.startsWith('/v1') && req.headers.authorization !== `Bearer ${key}`) {
        entry.status = 401;
        res.writeHead(401, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: 'Unauthorized' }));
        return;
      }
      const upstream = await undiciRequest(`${engine.url}${path}`, {
        method: req.method as 'GET' | 'POST',
        headers: { 'content-type': 'application/json' },
        ...(chunks.length > 0 && { body: Buffer.concat(chunks) }),
      });
      entry.status = upstream.statusCode;
      const headers: Record<string, string> = {
        'content-type': String(upstream.headers['content-type'] ?? 'application/json'),
        // Hop-by-hop, for this connection only: none may reach the gateway's client.
        connection: 'keep-alive, x-backend-hop',
        'x-backend-hop': 'for the gateway only',
        'keep-alive': 'timeout=5',
        'proxy-authenticate': 'Basic realm="backend"',
        upgrade: 'h2c',
        // End to end: must arrive.
        'x-backend-e2e': 'kept',
      };
      res.writeHead(upstream.statusCode, headers);
      for await (const chunk of upstream.body) res.write(chunk);
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    seen,
    /** The generation requests it received (POST /v1/...). */
    generations: () => seen.filter((s) => s.method === 'POST' && s.path.startsWith('/v1/')),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** Every header value a request carried, joined: a key must appear in none of them. */
const allValues = (h: IncomingHttpHeaders): string =>
  Object.values(h)
    .flat()
    .filter((v) => v !== undefined)
    .join('\n');

/**
 * A request to the gateway with hop-by-hop headers of the client's own (node:http, since undici
 * refuses to send them).
 */
function rawCompletion(
  gatewayUrl: string,
  authorization: string | null,
  stream: boolean,
): Promise<{ status: number; headers: IncomingHttpHeaders; text: string }> {
  const body = JSON.stringify({ model: MODEL, prompt: tokens(5, 40), max_tokens: 3, stream });
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${gatewayUrl}/v1/completions`,
      {
        method: 'POST',
        agent: false,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          ...(authorization !== null && { authorization }),
          connection: 'close, x-client-hop',
          'x-client-hop': 'for the gateway only',
          'keep-alive': 'timeout=7',
          te: 'trailers',
          'proxy-authorization': 'Basic c2VjcmV0OnNlY3JldA==',
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          text += d;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const CLIENT_HOP = ['x-client-hop', 'keep-alive', 'te', 'proxy-authorization', 'upgrade'];
const BACKEND_HOP = ['x-backend-hop', 'keep-alive', 'proxy-authenticate', 'upgrade'];

function assertNoClientHop(h: IncomingHttpHeaders): void {
  for (const name of CLIENT_HOP) assert.equal(h[name], undefined, `${name} went upstream`);
  assert.doesNotMatch(String(h.connection ?? ''), /x-client-hop/);
}

function assertNoBackendHop(h: Record<string, unknown>): void {
  for (const name of BACKEND_HOP) assert.equal(h[name], undefined, `${name} reached the client`);
  assert.doesNotMatch(String(h.connection ?? ''), /x-backend-hop/);
  assert.equal(h['x-backend-e2e'], 'kept', 'an end-to-end header is kept');
}

describe('upstream headers', () => {
  let engines: EngineServerHandle[] = [];
  const closers: (() => Promise<void>)[] = [];
  before(async () => {
    engines = await startEngines(1, { speedup: 100 });
  });
  after(async () => {
    for (const close of closers.reverse()) await close();
    await Promise.all(engines.map((e) => e.close()));
  });

  async function gatewayOn(
    backend: Awaited<ReturnType<typeof keyedBackend>>,
    backendKey: string | null,
    clientKeys: boolean,
  ): Promise<GatewayHandle> {
    const engine = engines[0]!;
    const gw = await startGatewayFor([], {
      backends: [
        {
          url: backend.url,
          events: engine.eventsEndpoint,
          replay: engine.replayEndpoint,
          model: null,
          apiKey: backendKey,
        },
      ],
      ...(clientKeys && { apiKeys: [{ key: CLIENT_KEY, tenant: 'acme' }] }),
    });
    closers.push(() => gw.close());
    return gw;
  }

  test("the backend's api-key goes as Bearer; the client's checked key never leaves", async () => {
    const backend = await keyedBackend(engines[0]!, BACKEND_KEY);
    closers.push(backend.close);
    const gw = await gatewayOn(backend, BACKEND_KEY, true);

    // The openai client, streamed and not: both answered by the key-checking backend.
    const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: CLIENT_KEY, maxRetries: 0 });
    const whole = await client.completions.create({
      model: MODEL,
      prompt: tokens(1, 40),
      max_tokens: 3,
    });
    assert.equal(whole.usage?.completion_tokens, 3);
    const stream = await client.completions.create({
      model: MODEL,
      prompt: tokens(2, 40),
      max_tokens: 3,
      stream: true,
    });
    let chunks = 0;
    for await (const c of stream) chunks += c.choices.length;
    assert.equal(chunks, 3);
    const models = await client.models.list();
    assert.ok(models.data.some((m) => m.id === MODEL));

    // Hop-by-hop headers of the client's, and of the backend's, stop at the gateway.
    for (const streamed of [false, true]) {
      const r = await rawCompletion(gw.url, `Bearer ${CLIENT_KEY}`, streamed);
      assert.equal(r.status, 200, r.text);
      assertNoBackendHop(r.headers);
    }
    // Without the gateway's key the backend is never asked.
    const before = backend.generations().length;
    const refused = await rawCompletion(gw.url, null, false);
    assert.equal(refused.status, 401);
    assert.equal(backend.generations().length, before);

    const generations = backend.generations();
    assert.equal(generations.length, 4, 'two via the openai client, two raw');
    for (const s of backend.seen) {
      if (s.path.startsWith('/v1')) {
        assert.equal(s.headers.authorization, `Bearer ${BACKEND_KEY}`, `${s.method} ${s.path}`);
      }
      assert.equal(s.status === 401, false, `${s.method} ${s.path} refused by the backend`);
      assert.ok(!allValues(s.headers).includes(CLIENT_KEY), `the client's key on ${s.path}`);
      assertNoClientHop(s.headers);
    }
  });

  test('without a backend key, a key the gateway checked is not passed on; an unchecked one is', async () => {
    const backend = await keyedBackend(engines[0]!, null);
    closers.push(backend.close);
    const checked = await gatewayOn(backend, null, true);
    const r = await rawCompletion(checked.url, `Bearer ${CLIENT_KEY}`, false);
    assert.equal(r.status, 200, r.text);
    const [seen] = backend.generations();
    assert.ok(seen, 'the backend was asked');
    assert.equal(seen.headers.authorization, undefined, "the gateway's own key stays there");
    assert.ok(!allValues(seen.headers).includes(CLIENT_KEY));
    assertNoClientHop(seen.headers);

    // A gateway with no client keys checks nothing: the client's header is the backend's to judge.
    const open = await gatewayOn(backend, null, false);
    const passed = await rawCompletion(open.url, 'Bearer sk-for-the-backend', true);
    assert.equal(passed.status, 200, passed.text);
    const last = backend.generations().at(-1)!;
    assert.equal(last.headers.authorization, 'Bearer sk-for-the-backend');
    assertNoClientHop(last.headers);
    assertNoBackendHop(passed.headers);
  });

  test("a backend's key replaces an unchecked client key too", async () => {
    const backend = await keyedBackend(engines[0]!, BACKEND_KEY);
    closers.push(backend.close);
    const open = await gatewayOn(backend, BACKEND_KEY, false);
    const r = await rawCompletion(open.url, 'Bearer sk-something-else', false);
    assert.equal(r.status, 200, r.text);
    const seen = backend.generations().at(-1)!;
    assert.equal(seen.headers.authorization, `Bearer ${BACKEND_KEY}`);
    assert.ok(!allValues(seen.headers).includes('sk-something-else'));
  });
});
