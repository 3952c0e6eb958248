/**
 * `kvroute epp` end to end: the test plays Envoy's ext_proc filter with a gRPC client over the
 * vendored protos (FULL_DUPLEX_STREAMED, as the inference extension's guides configure it),
 * written by field number and checked against the definitions (test/support/envoy.ts), not
 * with kvroute's own data-plane client,
 * forwards each request to the endpoint the picker named (embedded simulated engines on
 * 127.0.0.1) and feeds the response back through the picker, checking the router's ledger at
 * each step. Loopback only; every wait is bounded.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  EnvoyStream as DataPlaneStream,
  envoyClient as dataPlaneClient,
  httpBody,
  httpHeaders,
  metadata,
  requestHeaders,
  servedMetadata,
  setHeader,
  subsetMetadata,
} from '../support/envoy.ts';
import { BODY_CHUNK_BYTES } from '../../src/epp/messages.ts';
import { waitFor, within } from '../support/gateway.harness.ts';
import { type EppFleetHandle, startTestEpp } from '../support/epp.ts';

const CHAT = '/v1/chat/completions';

/** Deterministic words: a long, distinct system prompt per conversation. */
function words(seed: number, count: number): string {
  const out: string[] = [];
  let x = (seed * 2654435761 + 7) >>> 0;
  for (let i = 0; i < count; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    out.push(`w${x % 5000}`);
  }
  return out.join(' ');
}

interface Ledger {
  inFlight: number;
  queuedPromptTokens: number;
}

describe('kvroute epp over an embedded fleet', () => {
  let epp: EppFleetHandle;
  // biome-ignore lint/suspicious/noExplicitAny: generated gRPC client
  let client: any;
  const ledger = (): Ledger =>
    epp.pools.snapshot(Date.now()).replicas.reduce(
      (a, r) => ({
        inFlight: a.inFlight + r.inFlight,
        queuedPromptTokens: a.queuedPromptTokens + r.queuedPromptTokens,
      }),
      { inFlight: 0, queuedPromptTokens: 0 },
    );
  const drained = () =>
    waitFor(() => {
      const l = ledger();
      return l.inFlight === 0 && l.queuedPromptTokens === 0;
    }, 'the ledger to drain');

  before(async () => {
    epp = await startTestEpp(4, 'cost');
    client = dataPlaneClient(epp.address);
  });
  after(async () => {
    client?.close();
    await epp?.close();
  });

  /** Request headers and a body in chunks; returns the picker's header answer and echoed body. */
  async function sendRequest(
    stream: DataPlaneStream,
    body: Buffer,
    options: Parameters<typeof requestHeaders>[1] = {},
    chunkBytes = 16_384,
  ) {
    stream.send(requestHeaders(CHAT, options));
    for (let at = 0; at < body.length; at += chunkBytes) {
      const end = Math.min(body.length, at + chunkBytes);
      stream.send({ 4: httpBody(body.subarray(at, end), end === body.length) });
    }
    const head = await stream.next();
    assert.equal(head.response, 'request_headers', JSON.stringify(head));
    const echoed: Buffer[] = [];
    // biome-ignore lint/suspicious/noExplicitAny: decoded answers
    const chunks: any[] = [];
    for (;;) {
      const r = await stream.next();
      assert.equal(r.response, 'request_body');
      const s = r.request_body.response.body_mutation.streamed_response;
      chunks.push(s);
      echoed.push(Buffer.from(s.body));
      if (s.end_of_stream) break;
    }
    return { head, body: Buffer.concat(echoed), chunks };
  }

  /** What Envoy does once routed: the request goes to the endpoint, the response through us. */
  async function forwardAndRespond(stream: DataPlaneStream, endpoint: string, body: Buffer) {
    const res = await fetch(`http://${endpoint}${CHAT}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    stream.send({
      3: httpHeaders({
        ':status': String(res.status),
        'content-type': res.headers.get('content-type') ?? '',
      }),
    });
    const head = await stream.next();
    assert.equal(head.response, 'response_headers');
    const text: string[] = [];
    const reader = res.body!.getReader();
    for (;;) {
      const { value, done } = await reader.read();
      stream.send({ 5: httpBody(Buffer.from(value ?? []), !!done) });
      const echo = await stream.next();
      const s = echo.response_body.response.body_mutation.streamed_response;
      text.push(Buffer.from(s.body).toString('utf8'));
      assert.equal(s.end_of_stream, !!done);
      if (done) break;
    }
    return { status: res.status, text: text.join(''), head };
  }

  test('a conversation goes back to the replica that holds its prefix; the ledger drains', async () => {
    const turns = (seed: number, second: boolean) => [
      { role: 'system', content: words(seed, 1_500) },
      { role: 'user', content: `question ${seed}` },
      ...(second
        ? [
            { role: 'assistant', content: 'an answer' },
            { role: 'user', content: `and then ${seed}?` },
          ]
        : []),
    ];
    const seeds = [1, 2, 3, 4];
    /** Routes a turn; the exchange stays open (in the ledger) until `respond`. */
    const route = async (seed: number, second: boolean) => {
      const body = Buffer.from(
        JSON.stringify({ messages: turns(seed, second), max_tokens: 4, stream: true }),
      );
      const stream = new DataPlaneStream(client);
      const before = ledger();
      const { head, body: echoed, chunks } = await sendRequest(stream, body);
      const endpoint = setHeader(head.request_headers, 'x-gateway-destination-endpoint')!;
      assert.match(endpoint, /^127\.0\.0\.1:\d+$/);
      // The header and the dynamic metadata name the same endpoint; the route is recomputed.
      const lb = head.dynamic_metadata.fields['envoy.lb'].structValue.fields;
      assert.equal(lb['x-gateway-destination-endpoint'].stringValue, endpoint);
      assert.equal(head.request_headers.response.clear_route_cache, true);
      assert.equal(setHeader(head.request_headers, 'content-length'), String(body.length));
      assert.deepEqual(echoed, body, 'the body comes back as sent');
      assert.ok(chunks.every((c) => c.body.length <= BODY_CHUNK_BYTES));
      // Routed and not yet answered: in the ledger, its uncached prompt queued.
      const during = ledger();
      assert.equal(during.inFlight, before.inFlight + 1);
      if (!second) assert.ok(during.queuedPromptTokens > before.queuedPromptTokens);
      const respond = async () => {
        const { status, text, head: respHead } = await forwardAndRespond(stream, endpoint, echoed);
        assert.equal(status, 200);
        assert.match(text, /data: \[DONE\]/);
        assert.equal(setHeader(respHead.response_headers, 'x-kvroute-replica'), endpoint);
        stream.end();
        assert.equal((await within(120_000, stream.status, 'stream end')).code, 0);
      };
      return { endpoint, respond };
    };
    // First turns arrive together: the ledger spreads them over the replicas.
    const first = [];
    for (const seed of seeds) first.push(await route(seed, false));
    for (const f of first) await f.respond();
    await drained();
    const firstPicks = first.map((f) => f.endpoint);
    assert.ok(new Set(firstPicks).size > 1, `different conversations spread: ${firstPicks}`);
    // The second turns are matched on the engines' KV events, not on the router's own record of
    // the first (which expires): wait until each first pick's blocks are indexed, at least
    // MIN_BLOCKS per conversation it holds (a 1,500-word system prompt is far more).
    const MIN_BLOCKS = 32;
    const held = (endpoint: string) => firstPicks.filter((p) => p === endpoint).length;
    await waitFor(
      () =>
        firstPicks.every(
          (endpoint) =>
            (epp.pools.snapshot(Date.now()).replicas.find((r) => r.name.endsWith(endpoint))
              ?.indexedBlocks ?? 0) >=
            MIN_BLOCKS * held(endpoint),
        ),
      "the first turns' KV events",
    );
    for (const seed of seeds) {
      const second = await route(seed, true);
      assert.equal(second.endpoint, firstPicks[seed - 1], `conversation ${seed}'s second turn`);
      await second.respond();
      await drained();
    }
  });

  test("the first token moves the prompt off the queue; the stream's end releases the request", async () => {
    const body = Buffer.from(
      JSON.stringify({ prompt: words(99, 300), max_tokens: 3, stream: true }),
    );
    const stream = new DataPlaneStream(client);
    stream.send(requestHeaders('/v1/completions'));
    stream.send({ 4: httpBody(body, true) });
    await stream.next();
    await stream.next();
    assert.ok(ledger().queuedPromptTokens > 0);
    stream.send({ 3: httpHeaders({ 'content-type': 'text/event-stream' }) });
    await stream.next();
    stream.send({
      5: httpBody(Buffer.from('data: {"choices":[{"index":0,"text":"Hi"}]}\n\n'), false),
    });
    await stream.next();
    assert.deepEqual(ledger(), { inFlight: 1, queuedPromptTokens: 0 });
    stream.send({ 5: httpBody(Buffer.from('data: [DONE]\n\n'), true) });
    const last = await stream.next();
    assert.equal(last.response_body.response.body_mutation.streamed_response.end_of_stream, true);
    assert.deepEqual(ledger(), { inFlight: 0, queuedPromptTokens: 0 });
    stream.end();
    await within(120_000, stream.status, 'stream end');
  });

  test('a malformed body gets an immediate 400 with an OpenAI-shaped body, and the stream ends', async () => {
    for (const [raw, status, param] of [
      ['{"messages": [', 400, null],
      ['{"messages": "hello"}', 400, 'messages'],
      ['{"model": "no-such-model", "messages": [{"role": "user", "content": "x"}]}', 404, 'model'],
    ] as const) {
      const stream = new DataPlaneStream(client);
      stream.send(requestHeaders(CHAT));
      stream.send({ 4: httpBody(Buffer.from(raw), true) });
      const r = await within(120_000, stream.next(), 'the immediate response');
      assert.equal(r.response, 'immediate_response', raw);
      const ir = r.immediate_response;
      assert.equal(ir.status.code, status === 400 ? 'BadRequest' : 'NotFound');
      const error = JSON.parse(Buffer.from(ir.body).toString('utf8')).error;
      assert.equal(error.code, status);
      assert.equal(typeof error.message, 'string');
      if (param !== null) assert.equal(error.param, param);
      assert.equal(
        setHeader({ response: { header_mutation: ir.headers } }, 'content-type'),
        'application/json',
      );
      assert.match(ir.details, /^kvroute_err_[a-z_]+$/);
      assert.equal((await within(120_000, stream.status, 'stream end')).code, 0);
      assert.deepEqual(ledger(), { inFlight: 0, queuedPromptTokens: 0 });
    }
  });

  test('a client cancel mid-stream releases the request', async () => {
    const body = Buffer.from(
      JSON.stringify({ messages: [{ role: 'user', content: words(7, 400) }], stream: true }),
    );
    const stream = new DataPlaneStream(client);
    const { head } = await sendRequest(stream, body);
    assert.ok(setHeader(head.request_headers, 'x-gateway-destination-endpoint'));
    stream.send({ 3: httpHeaders({ 'content-type': 'text/event-stream' }) });
    await stream.next();
    assert.equal(ledger().inFlight, 1);
    stream.cancel();
    await drained();
  });

  test('a cancel while the picker is still reading the body leaves nothing behind', async () => {
    const stream = new DataPlaneStream(client);
    stream.send(requestHeaders(CHAT));
    stream.send({ 4: httpBody(Buffer.from('{"messages": ['), false) });
    stream.cancel();
    await within(120_000, stream.status, 'stream end');
    await drained();
  });

  test('the subset hint limits the candidates; an empty or foreign one is a 503', async () => {
    const all = (await epp.replicas()).map((r) => r.endpoint!);
    const body = Buffer.from(
      JSON.stringify({ messages: [{ role: 'user', content: words(3, 200) }], max_tokens: 2 }),
    );
    for (const only of all) {
      const stream = new DataPlaneStream(client);
      const { head } = await sendRequest(stream, body, { metadata: subsetMetadata([only]) });
      assert.equal(setHeader(head.request_headers, 'x-gateway-destination-endpoint'), only);
      stream.cancel();
      await drained();
    }
    for (const subset of [[], ['10.9.9.9:8000']]) {
      const stream = new DataPlaneStream(client);
      stream.send(requestHeaders(CHAT, { metadata: subsetMetadata(subset) }));
      stream.send({ 4: httpBody(body, true) });
      const r = await stream.next();
      assert.equal(r.immediate_response.status.code, 'ServiceUnavailable', JSON.stringify(subset));
      assert.equal(JSON.parse(Buffer.from(r.immediate_response.body).toString()).error.code, 503);
      await within(120_000, stream.status, 'stream end');
    }
    await drained();
  });

  test('a non-streamed response is buffered and sent back whole in 62,000-byte chunks', async () => {
    const prompt = words(11, 30_000);
    const body = Buffer.from(JSON.stringify({ prompt, max_tokens: 1 }));
    assert.ok(body.length > 2 * BODY_CHUNK_BYTES);
    const stream = new DataPlaneStream(client);
    stream.send(requestHeaders('/v1/completions'));
    stream.send({ 4: httpBody(body, true) });
    const head = await stream.next();
    assert.equal(setHeader(head.request_headers, 'content-length'), String(body.length));
    const sizes: number[] = [];
    for (;;) {
      const s = (await stream.next()).request_body.response.body_mutation.streamed_response;
      sizes.push(s.body.length);
      if (s.end_of_stream) break;
    }
    assert.deepEqual(
      sizes.slice(0, -1),
      sizes.slice(0, -1).map(() => BODY_CHUNK_BYTES),
    );
    assert.equal(
      sizes.reduce((a, b) => a + b, 0),
      body.length,
    );
    stream.send({ 3: httpHeaders({ 'content-type': 'application/json' }) });
    await stream.next();
    const json = Buffer.from(JSON.stringify({ choices: [{ text: 'x'.repeat(130_000) }] }));
    stream.send({ 5: httpBody(json.subarray(0, 70_000), false) });
    stream.send({ 5: httpBody(json.subarray(70_000), true) });
    const back: Buffer[] = [];
    for (;;) {
      const s = (await stream.next()).response_body.response.body_mutation.streamed_response;
      assert.ok(s.body.length <= BODY_CHUNK_BYTES);
      back.push(Buffer.from(s.body));
      if (s.end_of_stream) break;
    }
    assert.deepEqual(Buffer.concat(back), json);
    assert.equal(back.length, Math.ceil(json.length / BODY_CHUNK_BYTES));
    await drained();
    stream.end();
  });

  test('BUFFERED mode: headers pass at once, the pick rides on the body answer', async () => {
    const body = Buffer.from(
      JSON.stringify({ messages: [{ role: 'user', content: 'buffered' }], max_tokens: 2 }),
    );
    const stream = new DataPlaneStream(client);
    stream.send(requestHeaders(CHAT, { mode: 'BUFFERED' }));
    const first = await stream.next();
    assert.equal(first.response, 'request_headers');
    assert.equal(first.request_headers.response.header_mutation, null);
    stream.send({ 4: httpBody(body, true) });
    const r = await stream.next();
    assert.equal(r.response, 'request_body');
    const endpoint = setHeader(r.request_body, 'x-gateway-destination-endpoint');
    assert.ok(endpoint);
    assert.equal(r.request_body.response.clear_route_cache, true);
    assert.equal(r.request_body.response.body_mutation, null, 'the body is not rewritten');
    const lb = r.dynamic_metadata.fields['envoy.lb'].structValue.fields;
    assert.equal(lb['x-gateway-destination-endpoint'].stringValue, endpoint);
    stream.send({ 3: httpHeaders({}) });
    await stream.next();
    stream.send({ 5: httpBody(Buffer.from('{}'), true) });
    const echo = await stream.next();
    assert.equal(echo.response_body.response.body_mutation, null, 'an empty answer');
    await drained();
    stream.end();
  });

  test('another served endpoint releases the picked one at once', async () => {
    const stream = new DataPlaneStream(client);
    const body = Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: 'x y z' }] }));
    const { head } = await sendRequest(stream, body);
    const picked = setHeader(head.request_headers, 'x-gateway-destination-endpoint')!;
    const other = (await epp.replicas()).map((r) => r.endpoint!).find((e) => e !== picked)!;
    assert.equal(ledger().inFlight, 1);
    stream.send({
      3: httpHeaders({}),
      8: metadata(servedMetadata(other)),
    });
    const r = await stream.next();
    assert.equal(setHeader(r.response_headers, 'x-kvroute-replica'), other);
    assert.equal(ledger().inFlight, 0);
    stream.cancel();
  });

  test('a body-less request is routed at its headers; an unsupported body mode is refused', async () => {
    const get = new DataPlaneStream(client);
    get.send(requestHeaders('/v1/models', { endOfStream: true }));
    const r = await get.next();
    assert.match(setHeader(r.request_headers, 'x-gateway-destination-endpoint')!, /^127\./);
    assert.equal(setHeader(r.request_headers, 'content-length'), undefined);
    get.cancel();
    await drained();

    const streamed = new DataPlaneStream(client);
    streamed.send(requestHeaders(CHAT, { mode: 'STREAMED' }));
    const status = await within(120_000, streamed.status, 'stream end');
    assert.equal(status.code, 12, 'UNIMPLEMENTED');
    assert.match(status.details, /FULL_DUPLEX_STREAMED/);
  });
});
