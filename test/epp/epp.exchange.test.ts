/**
 * One ext_proc exchange with a picker whose answers the test holds in hand: whatever ends the
 * exchange (a cancel while the pick is still running, a body over the limit, a failed pick,
 * trailers, the response's end followed by the stream's close, a crash), the picked route is
 * finished exactly once and the stream is ended once; the planner hears of a response only when
 * it ended whole under 400, once.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ApiError } from '../../src/openai/errors.ts';
import { silentLogger } from '../../src/serving/log.ts';
import { GatewayMetrics } from '../../src/serving/metrics.ts';
import { requestHeaders } from '../../src/epp/dataPlane.ts';
import { Exchange } from '../../src/epp/exchange.ts';
import type { ProcessingRequest, ProcessingResponse } from '../../src/epp/messages.ts';
import { endpointOfPath, type PickInput, type Picked } from '../../src/epp/picker.ts';
import { ReplicaLabels } from '../../src/serving/replicaLabels.ts';

class FakePicker {
  readonly finished: Picked[] = [];
  readonly firstTokens: Picked[] = [];
  readonly servedTold: [Picked, number | null][] = [];
  readonly inputs: PickInput[] = [];
  #resolve: ((p: Picked) => void) | null = null;
  #reject: ((e: unknown) => void) | null = null;

  pick(input: PickInput): Promise<Picked> {
    this.inputs.push(input);
    return new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
  }
  answer(body?: Buffer): Picked {
    const picked = {
      endpoint: '10.0.0.9:8000',
      replica: 'replica-9',
      body: body ?? this.inputs.at(-1)!.body,
      stream: true,
      model: null,
      tenant: null,
    } as unknown as Picked;
    this.#resolve!(picked);
    return picked;
  }
  refuse(err: unknown): void {
    this.#reject!(err);
  }
  firstToken(p: Picked): void {
    this.firstTokens.push(p);
  }
  finish(p: Picked): void {
    this.finished.push(p);
  }
  served(p: Picked, completionTokens: number | null): void {
    this.servedTold.push([p, completionTokens]);
  }
}

function setup(bodyLimitBytes = 1_000_000) {
  const picker = new FakePicker();
  const sent: ProcessingResponse[] = [];
  const io = { ends: 0, fails: [] as string[] };
  const exchange = new Exchange(
    {
      picker,
      metrics: new GatewayMetrics({ replicaLoads: () => [] }),
      logger: silentLogger(),
      bodyLimitBytes,
      labels: new ReplicaLabels(true),
    },
    {
      send: (r) => sent.push(r),
      end: () => io.ends++,
      fail: (code, message) => io.fails.push(`${code}: ${message}`),
    },
  );
  /** As decoded off the wire: the `request` oneof names the field that is set. */
  const handle = (m: Record<string, unknown>) =>
    exchange.handle({
      ...m,
      request: Object.keys(m).find((k) => /^(request|response)_(headers|body|trailers)$/.test(k)),
    } as ProcessingRequest);
  return { picker, sent, io, exchange, handle };
}

const tick = () => new Promise((r) => setImmediate(r));
const body = (text: string, eos: boolean) => ({
  request_body: { body: Buffer.from(text), end_of_stream: eos },
});

describe('an exchange ends with its route finished exactly once', () => {
  test('a cancel while the pick is running: finished when the pick lands, nothing sent', async () => {
    const { picker, sent, exchange, handle } = setup();
    await handle(requestHeaders('/v1/completions'));
    const pending = handle(body('{"prompt": "x"}', true));
    await tick();
    exchange.cancel();
    assert.ok(exchange.settled);
    const picked = picker.answer();
    await pending;
    assert.deepEqual(picker.finished, [picked]);
    assert.deepEqual(sent, []);
    exchange.endOfInput();
    assert.equal(picker.finished.length, 1);
  });

  test('a body over the limit: an immediate 413, no pick, the stream ended', async () => {
    const { picker, sent, io, handle } = setup(10);
    await handle(requestHeaders('/v1/completions'));
    await handle(body('{"prompt": "far too long"}', false));
    await handle(body('more', true));
    assert.equal(picker.inputs.length, 0);
    assert.equal(sent.length, 1);
    assert.equal(sent[0]!.immediate_response?.status.code, 413);
    assert.equal(io.ends, 1);
  });

  test('a refused pick: its error as an immediate response, nothing to finish', async () => {
    const { picker, sent, io, exchange, handle } = setup();
    await handle(requestHeaders('/v1/completions'));
    const pending = handle(body('{}', true));
    await tick();
    picker.refuse(new ApiError('ERR_RATE_LIMITED', 'slow down', 'requests_per_second'));
    await pending;
    const ir = sent[0]!.immediate_response!;
    assert.equal(ir.status.code, 429);
    assert.equal(JSON.parse(ir.body.toString()).error.param, 'requests_per_second');
    assert.equal(io.ends, 1);
    assert.ok(exchange.settled);
    assert.equal(picker.finished.length, 0);
  });

  test('trailers end a body sent without end_of_stream; the body goes back without it', async () => {
    const { picker, sent, handle } = setup();
    await handle(requestHeaders('/v1/completions'));
    await handle(body('{"prompt": ', false));
    await handle(body('"x"}', false));
    const pending = handle({ request_trailers: { trailers: { headers: [] } } });
    await tick();
    assert.deepEqual(picker.inputs[0]!.body, Buffer.from('{"prompt": "x"}'));
    picker.answer();
    await pending;
    assert.deepEqual(
      sent.map((r) => Object.keys(r).find((k) => k !== 'dynamic_metadata')),
      ['request_headers', 'request_body', 'request_trailers'],
    );
    const chunk = sent[1]!.request_body!.response.body_mutation as {
      streamed_response: { end_of_stream: boolean };
    };
    assert.equal(chunk.streamed_response.end_of_stream, false);
  });

  test("the response's end, then the stream's close: one finish", async () => {
    const { picker, handle, exchange } = setup();
    await handle(requestHeaders('/v1/completions'));
    const pending = handle(body('{}', true));
    await tick();
    const picked = picker.answer();
    await pending;
    await handle({ response_headers: { headers: { headers: [] } } });
    await handle({
      response_body: { body: Buffer.from('data: {"choices":[{"text":"a"}]}\n\n') },
    });
    assert.deepEqual(picker.firstTokens, [picked]);
    await handle({ response_trailers: {} });
    exchange.endOfInput();
    exchange.cancel();
    assert.deepEqual(picker.finished, [picked]);
  });

  test('the planner is told of a response that ended whole under 400, once; not of a 500 or a cancel', async () => {
    const respond = async (status: string, end: 'body' | 'trailers' | 'cancel') => {
      const { picker, handle, exchange } = setup();
      await handle(requestHeaders('/v1/completions'));
      const pending = handle(body('{}', true));
      await tick();
      const picked = picker.answer();
      await pending;
      await handle({
        response_headers: { headers: { headers: [{ key: ':status', value: status }] } },
      });
      await handle({
        response_body: { body: Buffer.from('data: [DONE]\n\n'), end_of_stream: end === 'body' },
      });
      if (end === 'trailers') await handle({ response_trailers: {} });
      if (end === 'cancel') exchange.cancel();
      exchange.endOfInput();
      return { picker, picked };
    };
    for (const end of ['body', 'trailers'] as const) {
      const { picker, picked } = await respond('200', end);
      assert.deepEqual(picker.servedTold, [[picked, null]], end);
    }
    assert.deepEqual((await respond('500', 'body')).picker.servedTold, []);
    assert.deepEqual((await respond('200', 'cancel')).picker.servedTold, []);
  });

  test('a crash fails the stream with INTERNAL and releases the route', async () => {
    const { picker, io, exchange, handle } = setup();
    await handle(requestHeaders('/v1/completions'));
    const pending = handle(body('{}', true));
    await tick();
    const picked = picker.answer();
    await pending;
    exchange.crash(new Error('boom'));
    assert.deepEqual(
      io.fails.map((f) => f.split(':')[0]),
      ['INTERNAL'],
    );
    assert.deepEqual(picker.finished, [picked]);
  });
});

test("a request's :path names a generate endpoint only by the table's own keys", () => {
  assert.equal(endpointOfPath('/v1/chat/completions?x=1'), 'chat');
  assert.equal(endpointOfPath('/v1/completions'), 'completions');
  for (const path of ['/v1/models', undefined, 'constructor', 'toString', '__proto__']) {
    assert.equal(endpointOfPath(path), null, String(path));
  }
});
