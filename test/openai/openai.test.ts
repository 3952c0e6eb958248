/**
 * The shared OpenAI/HTTP pieces both servers build on: the SSE framer, the bounded body reader,
 * the error table and the request reader.
 */
import assert from 'node:assert/strict';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import {
  ApiError,
  type ApiErrorCode,
  badRequest,
  errorInfo,
  errorResponse,
} from '../../src/openai/errors.ts';
import { closeServer, listen, readBody, sendError, sendJson } from '../../src/openai/http.ts';
import { readGenerationRequest } from '../../src/openai/request.ts';
import { SseError, SseFramer } from '../../src/openai/sse.ts';

/** Feeds `bytes` cut at `cuts` (sorted offsets) and collects every event's data. */
function frame(bytes: Buffer, cuts: number[], framer = new SseFramer()): string[] {
  const out: string[] = [];
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    out.push(...framer.push(bytes.subarray(from, cut)));
    from = cut;
  }
  return out;
}

describe('SseFramer', () => {
  const stream = Buffer.from(
    '\uFEFFdata: {"choices":[{"text":"é✓ 𝄞"}]}\r\n\r\n' +
      ': keep-alive comment\n\n' +
      'event: message\nid: 7\ndata:{"a":1}\n\n' +
      'data: first\ndata:  second\r\r' +
      'data\n\n' +
      'retry: 10\n\n' +
      'data: [DONE]\n\n',
  );
  const expected = ['{"choices":[{"text":"é✓ 𝄞"}]}', '{"a":1}', 'first\n second', '', '[DONE]'];

  test('whole, then cut at every single offset (CR, CRLF and multi-byte characters split)', () => {
    assert.deepEqual(frame(stream, []), expected);
    for (let cut = 1; cut < stream.length; cut++) {
      assert.deepEqual(frame(stream, [cut]), expected, `cut at ${cut}`);
    }
  });

  test('one byte at a time, and any random cuts, give the same events', () => {
    assert.deepEqual(
      frame(
        stream,
        Array.from({ length: stream.length - 1 }, (_, i) => i + 1),
      ),
      expected,
    );
    fc.assert(
      fc.property(fc.uniqueArray(fc.integer({ min: 1, max: stream.length - 1 })), (cuts) => {
        assert.deepEqual(
          frame(
            stream,
            cuts.sort((a, b) => a - b),
          ),
          expected,
        );
      }),
    );
  });

  test('an event still open at the end of the bytes is not emitted', () => {
    const framer = new SseFramer();
    assert.deepEqual(framer.push(Buffer.from('data: x\n')), []);
    assert.deepEqual(framer.push(Buffer.from('data: y')), []);
    assert.deepEqual(framer.push(Buffer.from('\n\n')), ['x\ny']);
  });

  test('pushUntil stops at the first wanted event, at any cuts, and the framer is then done', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 1, max: stream.length - 1 })),
        fc.constantFrom(...expected),
        (cuts, target) => {
          const framer = new SseFramer();
          const seen: string[] = [];
          let from = 0;
          let found = false;
          for (const cut of [...cuts.sort((a, b) => a - b), stream.length]) {
            found = framer.pushUntil(stream.subarray(from, cut), (data) => {
              seen.push(data);
              return data === target;
            });
            from = cut;
            if (found) break;
          }
          assert.equal(found, true);
          // Every event before the wanted one was offered, none after it.
          assert.deepEqual(seen, expected.slice(0, expected.indexOf(target) + 1));
          assert.throws(() => framer.push(Buffer.from('data: more\n\n')), /stopped/);
        },
      ),
    );
    const framer = new SseFramer();
    assert.equal(
      framer.pushUntil(stream, () => false),
      false,
    );
    assert.deepEqual(framer.push(Buffer.from('data: later\n\n')), ['later']);
  });

  test('an event past the byte limit throws SseError, across chunks too', () => {
    const framer = new SseFramer({ maxEventBytes: 64 });
    assert.deepEqual(framer.push(Buffer.from(`data: ${'x'.repeat(40)}\n\n`)), ['x'.repeat(40)]);
    framer.push(Buffer.from(`data: ${'y'.repeat(40)}\n`));
    assert.throws(() => framer.push(Buffer.from(`data: ${'z'.repeat(40)}`)), SseError);
    const endless = new SseFramer({ maxEventBytes: 64 });
    assert.throws(() => {
      for (let i = 0; i < 10; i++) endless.push(Buffer.from('x'.repeat(10)));
    }, /grew past 64 bytes/);
  });
});

describe('error table', () => {
  const table: [ApiErrorCode, number, string][] = [
    ['ERR_BAD_REQUEST', 400, 'BadRequestError'],
    ['ERR_BAD_JSON', 400, 'BadRequestError'],
    ['ERR_CONTEXT_LENGTH', 400, 'BadRequestError'],
    ['ERR_NEVER_FITS', 400, 'BadRequestError'],
    ['ERR_UNAUTHORIZED', 401, 'AuthenticationError'],
    ['ERR_MODEL_NOT_FOUND', 404, 'NotFoundError'],
    ['ERR_ROUTE_NOT_FOUND', 404, 'NotFoundError'],
    ['ERR_METHOD_NOT_ALLOWED', 405, 'MethodNotAllowedError'],
    ['ERR_CLIENT_TIMEOUT', 408, 'RequestTimeoutError'],
    ['ERR_BODY_TOO_LARGE', 413, 'RequestEntityTooLargeError'],
    ['ERR_INTERNAL', 500, 'InternalServerError'],
    ['ERR_UPSTREAM', 502, 'BadGatewayError'],
    ['ERR_UNAVAILABLE', 503, 'ServiceUnavailableError'],
    ['ERR_NO_HEALTHY_BACKEND', 503, 'ServiceUnavailableError'],
  ];

  test("every code's status and vLLM-style type; code in the body is the status number", () => {
    for (const [code, status, type] of table) {
      const err = new ApiError(code, `why ${code}`, 'some_field');
      assert.equal(err.code, code);
      assert.equal(err.status, status);
      assert.deepEqual(errorInfo(err), {
        message: `why ${code}`,
        type,
        param: 'some_field',
        code: status,
      });
      const res = errorResponse(err);
      assert.equal(res.status, status);
      assert.deepEqual(JSON.parse(res.body), { error: errorInfo(err) });
      assert.equal(res.headers['content-type'], 'application/json');
      assert.equal(res.headers['retry-after'], status === 503 ? '1' : undefined, code);
      assert.equal(res.headers['www-authenticate'], status === 401 ? 'Bearer' : undefined, code);
    }
  });

  test('badRequest names its field; param is null otherwise', () => {
    assert.deepEqual(errorInfo(badRequest('no', 'n')), {
      message: 'no',
      type: 'BadRequestError',
      param: 'n',
      code: 400,
    });
    assert.equal(errorInfo(new ApiError('ERR_INTERNAL', 'x')).param, null);
  });
});

describe('readBody and the error writer', () => {
  const LIMIT = 1_000;
  let server: Server;
  let url: string;
  before(async () => {
    server = createServer((req, res) => {
      readBody(req, LIMIT).then(
        (body) => sendJson(res, 200, { bytes: body.length }),
        (err: ApiError) => sendError(res, err),
      );
    });
    ({ url } = await listen(server, 0, '127.0.0.1'));
  });
  after(() => closeServer(server));

  /** Sends `chunks` (chunked encoding unless `length` is given) and reads the answer. */
  function send(
    chunks: Buffer[],
    length?: number,
  ): Promise<{ status: number; connection: string | undefined; json: unknown }> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(url, {
        method: 'POST',
        headers: length === undefined ? {} : { 'content-length': length },
      });
      req.on('response', (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          text += d;
        });
        res.on('end', () =>
          resolve({
            status: res.statusCode!,
            connection: res.headers.connection,
            json: JSON.parse(text),
          }),
        );
      });
      // The server may answer 413 and close before the whole body is written.
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (err.code !== 'ECONNRESET' && err.code !== 'EPIPE') reject(err);
      });
      for (const c of chunks) req.write(c);
      req.end();
    });
  }

  test('a body at the limit is read whole, in one chunk or many', async () => {
    assert.deepEqual((await send([Buffer.alloc(LIMIT)], LIMIT)).json, { bytes: LIMIT });
    const pieces = Array.from({ length: 10 }, () => Buffer.alloc(LIMIT / 10));
    assert.deepEqual((await send(pieces)).json, { bytes: LIMIT });
  });

  test('a declared or streamed body past the limit is 413 and the connection closes', async () => {
    for (const r of [
      await send([Buffer.alloc(LIMIT + 1)], LIMIT + 1),
      await send(Array.from({ length: 11 }, () => Buffer.alloc(LIMIT / 10))),
    ]) {
      assert.equal(r.status, 413);
      assert.equal(r.connection, 'close');
      assert.deepEqual(r.json, {
        error: {
          message: `request body is larger than ${LIMIT} bytes`,
          type: 'RequestEntityTooLargeError',
          param: null,
          code: 413,
        },
      });
    }
  });

  test('a client that leaves before the body ends rejects with ERR_CLIENT_TIMEOUT', async () => {
    let arrived: () => void;
    const reading = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    const seen = new Promise<unknown>((resolve) => {
      server.once('request', (req) => {
        readBody(req, LIMIT).then(resolve, resolve);
        arrived();
      });
    });
    const req = httpRequest(url, { method: 'POST', headers: { 'content-length': 500 } });
    req.on('error', () => {});
    req.write(Buffer.alloc(100));
    // The client leaves once the server is reading its body (a fixed sleep could end first on a
    // busy host: no request event, and the test would wait forever).
    await reading;
    req.destroy();
    const err = (await seen) as ApiError;
    assert.ok(err instanceof ApiError);
    assert.equal(err.code, 'ERR_CLIENT_TIMEOUT');
    assert.equal(err.status, 408);
  });
});

describe('readGenerationRequest', () => {
  const VOCAB = 1_000;
  const read = (endpoint: 'completions' | 'chat', body: unknown) =>
    readGenerationRequest(endpoint, body, VOCAB);
  const paramOf = (fn: () => unknown): string | null => {
    try {
      fn();
    } catch (err) {
      assert.ok(err instanceof ApiError, String(err));
      assert.equal(err.status, 400);
      return err.param;
    }
    assert.fail('no error');
  };

  test('the four prompt forms vLLM accepts, as one prompt or a batch', () => {
    const prompts = (prompt: unknown) => {
      const r = read('completions', { prompt });
      assert.equal(r.endpoint, 'completions');
      return r.endpoint === 'completions' ? r.prompts : null;
    };
    assert.deepEqual(prompts('hi'), [{ text: 'hi' }]);
    assert.deepEqual(prompts([1, 2]), [{ tokenIds: [1, 2] }]);
    assert.deepEqual(prompts(['a', 'b']), [{ text: 'a' }, { text: 'b' }]);
    assert.deepEqual(prompts([[1], [2, 3]]), [{ tokenIds: [1] }, { tokenIds: [2, 3] }]);
    for (const bad of [
      null,
      5,
      '',
      [],
      [''],
      [1, 'a'],
      ['a', [1]],
      [[]],
      [1, VOCAB],
      [-1],
      [1.5],
    ]) {
      assert.equal(
        paramOf(() => read('completions', { prompt: bad })),
        'prompt',
        JSON.stringify(bad),
      );
    }
  });

  test('shared fields: defaults, and each bad one named', () => {
    const r = read('completions', { prompt: 'x' });
    assert.deepEqual(
      { ...r, prompts: undefined },
      {
        endpoint: 'completions',
        prompts: undefined,
        model: null,
        stream: false,
        includeUsage: false,
        cacheSalt: null,
        priority: null,
        seed: null,
        n: 1,
        maxTokens: null,
        ignoreEos: false,
        sampling: {
          stop: [],
          stopTokenIds: [],
          includeStopStrInOutput: false,
          minTokens: 0,
          ignoreEos: false,
          logprobs: null,
          echo: false,
          temperature: null,
          topP: null,
          topK: null,
          minP: null,
          tools: 0,
          toolChoice: null,
        },
      },
    );
    const full = read('completions', {
      prompt: 'x',
      model: 'm',
      stream: true,
      stream_options: { include_usage: true },
      cache_salt: 's',
      priority: -2,
      seed: 7,
      n: 2,
      max_tokens: 9,
      ignore_eos: true,
      temperature: 0.5,
    });
    assert.equal(full.model, 'm');
    assert.equal(full.includeUsage, true);
    assert.equal(full.cacheSalt, 's');
    assert.equal(full.priority, -2);
    assert.equal(full.n, 2);
    assert.equal(full.maxTokens, 9);
    const bad: [Record<string, unknown>, string][] = [
      [{ model: 1 }, 'model'],
      [{ stream: 'yes' }, 'stream'],
      [{ stream_options: 5 }, 'stream_options'],
      [{ stream: true, stream_options: { include_usage: 1 } }, 'include_usage'],
      [{ stream_options: {} }, 'stream_options'],
      [{ cache_salt: '' }, 'cache_salt'],
      [{ priority: 'high' }, 'priority'],
      [{ priority: 1.5 }, 'priority'],
      [{ seed: 1.5 }, 'seed'],
      [{ n: 0 }, 'n'],
      [{ max_tokens: 0 }, 'max_tokens'],
      [{ max_tokens: '5' }, 'max_tokens'],
      [{ ignore_eos: 'no' }, 'ignore_eos'],
    ];
    for (const [fields, param] of bad) {
      assert.equal(
        paramOf(() => read('completions', { prompt: 'x', ...fields })),
        param,
        JSON.stringify(fields),
      );
    }
    assert.equal(
      paramOf(() => read('completions', [1, 2])),
      null,
    );
  });

  test('chat: messages, and max_completion_tokens over max_tokens', () => {
    const messages = [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'a' },
          { type: 'text', text: 'b' },
        ],
      },
    ];
    const r = read('chat', { messages, max_tokens: 5, max_completion_tokens: 7 });
    assert.equal(r.endpoint, 'chat');
    // vLLM joins text parts with newlines (its "string" content format).
    assert.deepEqual(r.endpoint === 'chat' && r.messages, [{ role: 'user', content: 'a\nb' }]);
    assert.equal(r.maxTokens, 7);
    assert.equal(read('chat', { messages, max_tokens: 5 }).maxTokens, 5);
    assert.equal(
      paramOf(() => read('chat', { messages, max_tokens: -1 })),
      'max_tokens',
    );
    assert.equal(
      paramOf(() => read('chat', { messages, max_completion_tokens: 0 })),
      'max_completion_tokens',
    );
    assert.equal(
      paramOf(() => read('chat', {})),
      'messages',
    );
    assert.equal(
      paramOf(() => read('chat', { messages: [{ content: 'x' }] })),
      'messages',
    );
    assert.equal(
      paramOf(() =>
        read('chat', { messages: [{ role: 'user', content: [{ type: 'image_url' }] }] }),
      ),
      'messages',
    );
  });
});
