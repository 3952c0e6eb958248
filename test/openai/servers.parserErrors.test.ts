/**
 * What node's HTTP parser refuses on its own (a header block over its limit, `Content-Length:
 * -1`, a broken or unfinished chunked body, an `Expect` it does not meet, CONNECT) is answered
 * by both servers with a whole response in vLLM's error shape, not an empty body or a silent
 * close; a body in a coding the servers do not decode is refused with 415 instead of being read
 * as plain bytes. The bytes go over raw sockets: these are requests no HTTP client would send.
 */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import {
  type EngineServerHandle,
  type GatewayHandle,
  startEngines,
  startGatewayFor,
} from '../support/gateway.harness.ts';

/** Sends `data`, resolves with everything that came back once the server closes the socket. */
function exchange(url: string, data: string, timeoutMs = 60_000): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    let out = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no close within ${timeoutMs} ms; got ${JSON.stringify(out)}`));
    }, timeoutMs);
    socket.on('data', (d) => {
      out += d.toString('latin1');
      // A kept-alive answer (417) is complete once its body is in.
      const m = /content-length: (\d+)\r\n[\s\S]*?\r\n\r\n([\s\S]*)$/i.exec(out);
      if (m && Buffer.byteLength(m[2]!) >= Number(m[1])) socket.end();
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(out);
    });
    socket.write(data);
  });
}

/** Status and the parsed JSON body of one raw answer. */
function parse(raw: string): { status: number; headers: string; body: unknown } {
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(raw)?.[1]);
  const split = raw.indexOf('\r\n\r\n');
  return { status, headers: raw.slice(0, split), body: JSON.parse(raw.slice(split + 4)) };
}

const BODY = '{"model":"llama-3.3-70b","prompt":"hi","max_tokens":1}';

const CASES: { name: string; data: string; status: number; type: string }[] = [
  {
    name: 'a header block over node’s limit',
    data: `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
    status: 431,
    type: 'RequestHeaderFieldsTooLargeError',
  },
  {
    name: 'Content-Length: -1',
    data: 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n',
    status: 400,
    type: 'BadRequestError',
  },
  {
    name: 'a chunk size that is not hex',
    data: 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n',
    status: 400,
    type: 'BadRequestError',
  },
  {
    name: 'an unfinished chunked body (the request limit)',
    data: 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab',
    status: 408,
    type: 'RequestTimeoutError',
  },
  {
    name: 'an Expect other than 100-continue',
    data: `POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: fancy\r\nContent-Length: ${BODY.length}\r\n\r\n${BODY}`,
    status: 417,
    type: 'ExpectationFailedError',
  },
  {
    name: 'Transfer-Encoding: gzip, chunked',
    data: `POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n${BODY.length.toString(16)}\r\n${BODY}\r\n0\r\n\r\n`,
    status: 415,
    type: 'UnsupportedMediaTypeError',
  },
  {
    name: 'Content-Encoding: gzip',
    data: `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: ${BODY.length}\r\n\r\n${BODY}`,
    status: 415,
    type: 'UnsupportedMediaTypeError',
  },
  {
    name: 'CONNECT',
    data: 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n',
    status: 405,
    type: 'MethodNotAllowedError',
  },
  {
    name: 'bytes that are not HTTP',
    data: '\u0016\u0003\u0001\u0002\u0000hello\r\n\r\n',
    status: 400,
    type: 'BadRequestError',
  },
];

describe('parser-level errors are answered in the error shape', () => {
  let engines: EngineServerHandle[];
  let gw: GatewayHandle;

  before(async () => {
    engines = await startEngines(1, { speedup: 100, headersTimeoutMs: 500, requestTimeoutMs: 800 });
    gw = await startGatewayFor(engines, { headersTimeoutMs: 500, requestTimeoutMs: 800 });
  });
  after(async () => {
    await gw.close();
    for (const e of engines) await e.close();
  });

  for (const server of ['engine', 'gateway'] as const) {
    for (const c of CASES) {
      test(`${server}: ${c.name} -> ${c.status}`, async () => {
        const url = server === 'engine' ? engines[0]!.url : gw.url;
        const { status, headers, body } = parse(await exchange(url, c.data));
        assert.equal(status, c.status);
        assert.match(headers, /\r\ncontent-type: application\/json/i);
        const error = (body as { error: Record<string, unknown> }).error;
        assert.deepEqual(Object.keys(error).sort(), ['code', 'message', 'param', 'type']);
        assert.equal(error.code, c.status);
        assert.equal(error.type, c.type);
        assert.equal(typeof error.message, 'string');
        if (c.status === 415) assert.match(headers, /\r\naccept-encoding: identity/i);
      });
    }
  }
});
