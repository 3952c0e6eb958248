/**
 * The gateway's structured log, captured from its logger: request ids (accepted, generated,
 * returned, passed upstream), the access line, a replica going down and coming back, an engine
 * restart, undecodable KV event batches (rate-limited) and a 500.
 */
import assert from 'node:assert/strict';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { Publisher } from 'zeromq';
import { defaultConfig } from '../../src/serving/config.ts';
import { type GatewayHandle, startGateway } from '../../src/gateway/gateway.ts';
import { makeLogger } from '../../src/serving/log.ts';
import { encodeEventBatch, encodeSeq } from '../../src/kv/wire.ts';
import { waitFor } from '../support/gateway.harness.ts';

type Line = Record<string, unknown> & { level: string; msg: string };

const SSE =
  'data: {"id":"x","object":"text_completion","choices":[{"index":0,"text":"hi","finish_reason":"length"}]}\n\ndata: [DONE]\n\n';

describe('gateway logs', () => {
  const lines: Line[] = [];
  const upstreamHeaders: IncomingHttpHeaders[] = [];
  let backend: Server;
  let port = 0;
  let pub: Publisher;
  let gw: GatewayHandle;

  const startBackend = async () => {
    backend = createServer((req, res) => {
      if (req.url === '/metrics') {
        res.end('vllm:kv_cache_usage_perc 0.1\nvllm:num_requests_running 0\n');
        return;
      }
      if (req.url === '/health') return void res.end();
      // Only proxied requests: the gateway also asks /v1/models and /tokenize on its own.
      if (req.url?.startsWith('/v1/c')) upstreamHeaders.push(req.headers);
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.end(SSE);
      });
    });
    await new Promise<void>((resolve) => backend.listen(port, '127.0.0.1', resolve));
    port = (backend.address() as AddressInfo).port;
  };
  const stopBackend = async () => {
    backend.closeAllConnections();
    await new Promise<void>((resolve) => backend.close(() => resolve()));
  };
  const find = (msg: RegExp, extra: (l: Line) => boolean = () => true) =>
    lines.filter((l) => msg.test(l.msg) && extra(l));
  const post = (headers: Record<string, string> = {}) =>
    fetch(`${gw.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ model: 'fake', prompt: 'hello', stream: true }),
    });

  before(async () => {
    await startBackend();
    pub = new Publisher({ linger: 0 });
    await pub.bind('tcp://127.0.0.1:*');
    const destination = new Writable({
      write(chunk, _encoding, done) {
        for (const text of String(chunk).split('\n')) if (text) lines.push(JSON.parse(text));
        done();
      },
    });
    gw = await startGateway(
      {
        ...defaultConfig(),
        port: 0,
        accessLog: true,
        backends: [
          {
            url: `http://127.0.0.1:${port}`,
            events: pub.lastEndpoint!,
            replay: null,
            model: 'fake',
            apiKey: null,
          },
        ],
      },
      { logger: makeLogger({ level: 'info', destination, pretty: false }) },
    );
  });
  after(async () => {
    await gw?.close();
    pub?.close();
    await stopBackend().catch(() => {});
  });

  test('request ids: the client one is kept, else one is made; returned, sent upstream, logged', async () => {
    const given = await post({ 'x-request-id': 'trace-42' });
    await given.text();
    assert.equal(given.headers.get('x-request-id'), 'trace-42');
    assert.equal(upstreamHeaders.at(-1)?.['x-request-id'], 'trace-42');
    const made = await post();
    await made.text();
    const id = made.headers.get('x-request-id');
    assert.match(id ?? '', /^[0-9a-f-]{36}$/);
    assert.equal(upstreamHeaders.at(-1)?.['x-request-id'], id);
    const odd = await post({ 'x-request-id': 'has spaces in it' });
    await odd.text();
    assert.notEqual(odd.headers.get('x-request-id'), 'has spaces in it');
    // Error answers carry the id too.
    const bad = await fetch(`${gw.url}/v1/completions`, {
      method: 'POST',
      headers: { 'x-request-id': 'bad-1' },
      body: '{',
    });
    assert.equal(bad.status, 400);
    assert.equal(bad.headers.get('x-request-id'), 'bad-1');

    const access = await waitFor(
      () => find(/^request$/, (l) => l.reqId === 'trace-42')[0],
      'the access line',
    );
    assert.equal(access.level, 'info');
    assert.equal(access.status, 200);
    assert.equal(access.model, 'fake');
    assert.equal(access.tenant, null);
    assert.equal(access.replica, `127.0.0.1:${port}`);
    assert.equal(typeof access.cachedTokens, 'number');
    assert.equal(typeof access.ttftMs, 'number');
    assert.equal(access.completed, true);
    assert.ok(find(/^request$/, (l) => l.reqId === 'bad-1' && l.status === 400).length === 1);
  });

  test('an engine restart and undecodable event batches are logged, the latter rate-limited', async () => {
    const batch = encodeEventBatch([{ type: 'AllBlocksCleared' }], { tsS: 1, format: 'map' });
    const send = (seq: bigint, payload: Buffer) =>
      pub.send([Buffer.alloc(0), encodeSeq(seq), payload]);
    // The SUB joins asynchronously: publish seq 0 until it is seen.
    await waitFor(async () => {
      await send(0n, batch);
      return gw.router.snapshot().replicas[0]!.lastEventAtMs !== null;
    }, 'the subscriber to join');
    await send(1n, batch);
    await send(2n, batch);
    await send(0n, batch); // the sequence went back: a restart
    const restart = await waitFor(() => find(/engine restarted/)[0], 'the restart line');
    assert.equal(restart.level, 'warn');
    assert.equal(restart.replica, `127.0.0.1:${port}`);
    const firstBadMs = Date.now();
    for (let seq = 1n; seq <= 5n; seq++) await send(seq, Buffer.from('not msgpack at all'));
    await waitFor(
      async () =>
        (
          (await (await fetch(`${gw.url}/router/replicas`)).json()) as {
            replicas: { subscriber: { decodeErrors: number } }[];
          }
        ).replicas[0]!.subscriber.decodeErrors >= 5,
      'five decode errors counted',
    );
    // One line per 10 s window at most: one here, unless this host took over 10 s to deliver
    // five batches (then a line per window begun), never one per error.
    const windows = 1 + Math.floor((Date.now() - firstBadMs) / 10_000);
    const decode = find(/could not be decoded/);
    assert.ok(decode.length >= 1, 'the first error is logged');
    assert.ok(decode.length <= Math.min(windows, 4), `${decode.length} lines, ${windows} windows`);
    assert.equal(decode[0]!.replica, `127.0.0.1:${port}`);
    assert.ok((decode[0]!.err as { message: string }).message.length > 0);
  });

  test('a 500 is logged with its request id and cause', async () => {
    const route = gw.router.route.bind(gw.router);
    gw.router.route = () => {
      throw new Error('boom in the router');
    };
    try {
      const res = await post({ 'x-request-id': 'will-fail' });
      assert.equal(res.status, 500);
      assert.equal(res.headers.get('x-request-id'), 'will-fail');
    } finally {
      gw.router.route = route;
    }
    const line = await waitFor(() => find(/internal error/)[0], 'the 500 line');
    assert.equal(line.level, 'error');
    assert.equal(line.reqId, 'will-fail');
    assert.equal(line.status, 500);
    assert.match(JSON.stringify(line.err), /boom in the router/);
  });

  test('a replica going down, a retry, the 503 and the replica coming back are logged', async () => {
    await stopBackend();
    const res = await post({ 'x-request-id': 'no-backend' });
    assert.equal(res.status, 503);
    const down = await waitFor(() => find(/^replica down$/)[0], 'the down line');
    assert.equal(down.level, 'warn');
    assert.equal(down.replica, `127.0.0.1:${port}`);
    assert.equal(typeof down.reason, 'string');
    const unavailable = find(/^(?!request$)/, (l) => l.reqId === 'no-backend' && l.status === 503);
    assert.equal(unavailable.length, 1);
    assert.equal(unavailable[0]!.level, 'warn');
    await startBackend();
    const up = await waitFor(() => find(/^replica up/)[0], 'the up line', 30_000);
    assert.equal(up.level, 'info');
    assert.equal(up.replica, `127.0.0.1:${port}`);
    const again = await post();
    assert.equal(again.status, 200);
    await again.text();
  });
});

test('on a terminal the lines are readable text, not JSON', () => {
  let out = '';
  const destination = Object.assign(
    new Writable({
      write(chunk, _encoding, done) {
        out += String(chunk);
        done();
      },
    }),
    { isTTY: true },
  );
  makeLogger({ level: 'info', destination }).warn({ replica: 'r1', n: 2 }, 'replica down');
  assert.match(out, /^\d\d:\d\d:\d\d\.\d{3} \S*WARN\s\S* replica down replica=r1 n=2\n$/);
});
