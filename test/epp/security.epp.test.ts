/**
 * The endpoint picker's response path relays no engine `kv_transfer_params`, as the gateway
 * relays none (`src/serving/engineFields.ts`): a JSON answer, an event stream whose events are
 * cut across chunks, and a BUFFERED answer all go back without them, everything else unchanged.
 * The test plays Envoy's ext_proc filter against a live `kvroute epp` and feeds it engine
 * answers that carry the fields (a prefill engine's, as vLLM's connector writes them).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  EnvoyStream,
  envoyClient,
  httpBody,
  httpHeaders,
  requestHeaders,
  setHeader,
} from '../support/envoy.ts';
import { within } from '../support/gateway.harness.ts';
import { type EppFleetHandle, startTestEpp } from '../support/epp.ts';

const CHAT = '/v1/chat/completions';
const PARAMS = {
  do_remote_prefill: true,
  remote_engine_id: 'engine-7f3a',
  remote_host: '10.1.2.3',
  remote_port: 5600,
  remote_block_ids: [4, 5, 6],
};

// biome-ignore lint/suspicious/noExplicitAny: decoded answers
const bodyOf = (r: any): Buffer => {
  const m = r.response_body.response.body_mutation;
  if (m === null) return Buffer.alloc(0);
  return Buffer.from(m.streamed_response?.body ?? m.body ?? []);
};

describe('the endpoint picker strips engines’ kv_transfer_params from what it relays', () => {
  let epp: EppFleetHandle;
  // biome-ignore lint/suspicious/noExplicitAny: generated gRPC client
  let client: any;
  before(async () => {
    epp = await startTestEpp(2);
    client = envoyClient(epp.address);
  });
  after(async () => {
    client?.close();
    await epp?.close();
  });

  /** A picked request, its response headers answered; returns the stream and that answer. */
  async function picked(
    stream: boolean,
    responseHeaders: Record<string, string>,
    mode?: 'BUFFERED',
  ) {
    const s = new EnvoyStream(client);
    const body = Buffer.from(
      JSON.stringify({ messages: [{ role: 'user', content: 'hello there' }], stream }),
    );
    s.send(requestHeaders(CHAT, mode ? { mode: 'BUFFERED', responseMode: 'BUFFERED' } : {}));
    if (mode) await s.next();
    s.send({ 4: httpBody(body, true) });
    const head = await s.next();
    assert.ok(
      setHeader(head.request_headers ?? head.request_body, 'x-gateway-destination-endpoint'),
    );
    if (!mode) {
      for (;;) {
        const r = await s.next();
        if (r.request_body.response.body_mutation.streamed_response.end_of_stream) break;
      }
    }
    s.send({ 3: httpHeaders({ ':status': '200', ...responseHeaders }) });
    const answer = await s.next();
    assert.equal(answer.response, 'response_headers');
    return { s, answer };
  }

  test('a JSON answer: the field is gone, the rest as sent, content-length dropped', async () => {
    const engine = {
      id: 'cmpl-1',
      object: 'chat.completion',
      choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
      kv_transfer_params: PARAMS,
    };
    const raw = Buffer.from(JSON.stringify(engine));
    const { s, answer } = await picked(false, {
      'content-type': 'application/json',
      'content-length': String(raw.length),
    });
    assert.deepEqual(answer.response_headers.response.header_mutation.remove_headers, [
      'content-length',
    ]);
    const half = Math.floor(raw.length / 2);
    s.send({ 5: httpBody(raw.subarray(0, half), false) });
    s.send({ 5: httpBody(raw.subarray(half), true) });
    const out: Buffer[] = [];
    for (;;) {
      const r = await s.next();
      out.push(bodyOf(r));
      if (r.response_body.response.body_mutation.streamed_response.end_of_stream) break;
    }
    const text = Buffer.concat(out).toString('utf8');
    assert.doesNotMatch(text, /kv_transfer_params|remote_host|remote_block_ids/);
    const { kv_transfer_params: _, ...rest } = engine;
    assert.deepEqual(JSON.parse(text), rest);
    s.end();
    await within(60_000, s.status, 'stream end');
  });

  test('an event stream cut mid-event: each event intact, the field gone', async () => {
    const events = [
      { id: 'c', choices: [{ index: 0, delta: { content: 'Hel' } }] },
      { id: 'c', choices: [{ index: 0, delta: { content: 'lo' } }], kv_transfer_params: PARAMS },
      { id: 'c', choices: [], usage: { prompt_tokens: 3, completion_tokens: 2 } },
    ];
    const raw = Buffer.from(
      `${events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('')}data: [DONE]\n\n`,
    );
    const { s } = await picked(true, { 'content-type': 'text/event-stream' });
    // Cuts that fall inside the event naming the field, and inside its name.
    const at = raw.indexOf('kv_transfer');
    const cuts = [0, at - 20, at + 4, at + 40, raw.length];
    const out: Buffer[] = [];
    for (let i = 0; i + 1 < cuts.length; i++) {
      const last = i + 2 === cuts.length;
      s.send({ 5: httpBody(raw.subarray(cuts[i]!, cuts[i + 1]!), last) });
      for (;;) {
        const r = await s.next();
        out.push(bodyOf(r));
        if (r.response_body.response.body_mutation.streamed_response.end_of_stream || !last) break;
      }
    }
    const text = Buffer.concat(out).toString('utf8');
    assert.doesNotMatch(text, /kv_transfer_params|remote_host/);
    const data = text
      .split('\n\n')
      .filter((e) => e.startsWith('data: '))
      .map((e) => e.slice(6));
    assert.equal(data.at(-1), '[DONE]');
    const { kv_transfer_params: _, ...second } = events[1]!;
    assert.deepEqual(
      data.slice(0, -1).map((d) => JSON.parse(d)),
      [events[0], second, events[2]],
    );
    s.end();
    await within(60_000, s.status, 'stream end');
  });

  test('BUFFERED: the whole answer comes back as a body mutation without the field', async () => {
    const engine = { id: 'x', choices: [], kv_transfer_params: PARAMS };
    const { s } = await picked(false, { 'content-type': 'application/json' }, 'BUFFERED');
    s.send({ 5: httpBody(Buffer.from(JSON.stringify(engine)), true) });
    const r = await s.next();
    assert.deepEqual(JSON.parse(bodyOf(r).toString('utf8')), { id: 'x', choices: [] });
    s.end();
    await within(60_000, s.status, 'stream end');
  });
});
