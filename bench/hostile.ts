/**
 * A hostile-input campaign against both servers: `node --import tsx bench/hostile.ts [--json]`.
 *
 * Four servers in this process on 127.0.0.1: an engine with an API key (`--api-key`), one
 * without, a gateway with a client key in front of the first (its backend `api-key` set), and
 * a gateway without keys in front of the second. Each gets the same bad inputs (bodies that are
 * not JSON or not the API's, wrong field types and ranges, unknown models, routes and methods, a
 * body over the limit, and raw bytes node's parser refuses: a huge header block, `Content-Length:
 * -1`, broken and unfinished chunked bodies, an unmet `Expect`, content codings, CONNECT, bytes
 * that are not HTTP), with the right key where there is one; the keyed ones also get no key, a
 * wrong key and a Basic scheme. An answer is in shape when it has an error status (>= 400) and
 * vLLM's body: `{"error": {"message", "type", "param", "code" = the status}}`, or, for the
 * engine's key check, vLLM's own `{"error": "Unauthorized"}`. Reported: tried, in shape, and
 * every answer that was not (status and the first bytes), per server.
 */
import { connect } from 'node:net';
import { startEngineServer } from '../src/engine/server/server.ts';
import { backendOf } from '../src/embedded/fleet.ts';
import { defaultConfig } from '../src/serving/config.ts';
import { startGateway } from '../src/gateway/gateway.ts';
import { readBenchArgs } from './flags.ts';

const json = readBenchArgs('hostile', { json: { type: 'boolean' } }).json === true;
const MODEL = 'llama-3.3-70b';

interface Target {
  name: string;
  url: string;
  key: string | null;
}

interface Answer {
  status: number;
  body: string;
}

/** Sends raw bytes; reads the answer until the body is in (content-length) or the close. */
function raw(url: string, data: string | Buffer, timeoutMs = 15_000): Promise<Answer> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    let out = Buffer.alloc(0);
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      const text = out.toString('latin1');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      const split = text.indexOf('\r\n\r\n');
      let body = split < 0 ? '' : text.slice(split + 4);
      if (/\r\ntransfer-encoding: chunked/i.test(text.slice(0, split))) body = unchunk(body);
      resolve({ status, body });
    };
    const timer = setTimeout(done, timeoutMs);
    socket.on('data', (d) => {
      out = Buffer.concat([out, d]);
      const text = out.toString('latin1');
      const split = text.indexOf('\r\n\r\n');
      const len = /\r\ncontent-length: (\d+)/i.exec(text.slice(0, split))?.[1];
      if (split >= 0 && len !== undefined && out.length - split - 4 >= Number(len)) done();
    });
    socket.on('error', () => {});
    socket.on('close', done);
    socket.write(data);
  });
}

function unchunk(body: string): string {
  let out = '';
  let at = 0;
  for (;;) {
    const eol = body.indexOf('\r\n', at);
    if (eol < 0) return out;
    const size = Number.parseInt(body.slice(at, eol), 16);
    if (!(size > 0)) return out;
    out += body.slice(eol + 2, eol + 2 + size);
    at = eol + 4 + size;
  }
}

const request = (
  method: string,
  path: string,
  body: string | null,
  headers: Record<string, string>,
): string => {
  const lines = [`${method} ${path} HTTP/1.1`, 'Host: x', 'Connection: close'];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  if (body !== null)
    lines.push('Content-Type: application/json', `Content-Length: ${Buffer.byteLength(body)}`);
  return `${lines.join('\r\n')}\r\n\r\n${body ?? ''}`;
};

const completion = (fields: Record<string, unknown>) =>
  JSON.stringify({ model: MODEL, prompt: 'hello', max_tokens: 2, ...fields });
const chat = (fields: Record<string, unknown>) =>
  JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], ...fields });

/** [name, method, path, body] over HTTP that parses. */
const HTTP_CASES: [string, string, string, string | null][] = [
  ['body not JSON', 'POST', '/v1/completions', '{'],
  ['body null', 'POST', '/v1/completions', 'null'],
  ['body a list', 'POST', '/v1/completions', '[]'],
  ['prompt a number', 'POST', '/v1/completions', completion({ prompt: 5 })],
  ['no prompt', 'POST', '/v1/completions', JSON.stringify({ model: MODEL })],
  ['empty prompt list', 'POST', '/v1/completions', completion({ prompt: [] })],
  ['token id past the vocabulary', 'POST', '/v1/completions', completion({ prompt: [99_999_999] })],
  ['negative token id', 'POST', '/v1/completions', completion({ prompt: [-1] })],
  ['max_tokens -1', 'POST', '/v1/completions', completion({ max_tokens: -1 })],
  ['max_tokens a string', 'POST', '/v1/completions', completion({ max_tokens: 'ten' })],
  ['max_tokens past the context', 'POST', '/v1/completions', completion({ max_tokens: 1e12 })],
  ['n 0', 'POST', '/v1/completions', completion({ n: 0 })],
  ['temperature -1', 'POST', '/v1/completions', completion({ temperature: -1 })],
  ['top_p 2', 'POST', '/v1/completions', completion({ top_p: 2 })],
  ['logprobs 1000', 'POST', '/v1/completions', completion({ logprobs: 1000 })],
  ['stream a string', 'POST', '/v1/completions', completion({ stream: 'yes' })],
  [
    'stream_options without stream',
    'POST',
    '/v1/completions',
    completion({ stream_options: { include_usage: true } }),
  ],
  ['seed a string', 'POST', '/v1/completions', completion({ seed: 'x' })],
  ['empty cache_salt', 'POST', '/v1/completions', completion({ cache_salt: '' })],
  ['stop a number', 'POST', '/v1/completions', completion({ stop: 5 })],
  ['unknown model', 'POST', '/v1/completions', completion({ model: 'nope' })],
  ['chat without messages', 'POST', '/v1/chat/completions', JSON.stringify({ model: MODEL })],
  ['chat messages a string', 'POST', '/v1/chat/completions', chat({ messages: 'hi' })],
  [
    // vLLM takes any role name (CustomChatCompletionMessageParam), but not none.
    'chat message without a role',
    'POST',
    '/v1/chat/completions',
    chat({ messages: [{ content: 'x' }] }),
  ],
  [
    'chat content a number',
    'POST',
    '/v1/chat/completions',
    chat({ messages: [{ role: 'user', content: 5 }] }),
  ],
  ['chat max_tokens 0', 'POST', '/v1/chat/completions', chat({ max_tokens: 0 })],
  ['GET on a POST route', 'GET', '/v1/completions', null],
  ['DELETE on a POST route', 'DELETE', '/v1/chat/completions', null],
  ['unknown route', 'GET', '/nope', null],
  ['unknown /v1 route', 'POST', '/v1/nope', '{}'],
  ['tokenize body not JSON', 'POST', '/tokenize', '{'],
];

const BIG = 'x'.repeat(20 * 1024 * 1024);
const RAW_CASES: [string, (auth: string) => string][] = [
  ['body over the limit', (a) => request('POST', '/v1/completions', `{"prompt":"${BIG}"}`, hdr(a))],
  [
    'header block over the limit',
    (a) => `GET /v1/models HTTP/1.1\r\nHost: x\r\n${a}X-Big: ${'a'.repeat(20_000)}\r\n\r\n`,
  ],
  [
    'Content-Length -1',
    (a) => `POST /v1/completions HTTP/1.1\r\nHost: x\r\n${a}Content-Length: -1\r\n\r\n`,
  ],
  [
    'Content-Length twice, different',
    (a) =>
      `POST /v1/completions HTTP/1.1\r\nHost: x\r\n${a}Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}`,
  ],
  [
    'chunk size not hex',
    (a) =>
      `POST /v1/completions HTTP/1.1\r\nHost: x\r\n${a}Transfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n`,
  ],
  [
    'unfinished chunked body',
    (a) =>
      `POST /v1/completions HTTP/1.1\r\nHost: x\r\n${a}Transfer-Encoding: chunked\r\n\r\n5\r\nab`,
  ],
  [
    'Expect: fancy',
    (a) => request('POST', '/v1/completions', completion({}), { ...hdr(a), Expect: 'fancy' }),
  ],
  [
    'Transfer-Encoding gzip, chunked',
    (a) =>
      `POST /v1/completions HTTP/1.1\r\nHost: x\r\n${a}Transfer-Encoding: gzip, chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`,
  ],
  [
    'Content-Encoding gzip',
    (a) =>
      request('POST', '/v1/completions', completion({}), { ...hdr(a), 'Content-Encoding': 'gzip' }),
  ],
  [
    'Content-Encoding br',
    (a) =>
      request('POST', '/v1/chat/completions', chat({}), { ...hdr(a), 'Content-Encoding': 'br' }),
  ],
  ['CONNECT', () => 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'],
  [
    'not HTTP (a TLS hello)',
    () => '\u0016\u0003\u0001\u0002\u0000\u0001\u0000\u0001\u00fc\u0003\u0003\r\n\r\n',
  ],
  ['bad request line', () => 'HELLO\r\n\r\n'],
  ['HTTP/2 preface over HTTP/1', () => 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'],
];

function hdr(authLine: string): Record<string, string> {
  const m = /^Authorization: (.*)\r\n$/.exec(authLine);
  return m ? { Authorization: m[1]! } : {};
}

function inShape(a: Answer, engine401: boolean): boolean {
  if (a.status < 400) return false;
  let body: unknown;
  try {
    body = JSON.parse(a.body);
  } catch {
    return false;
  }
  if (engine401 && a.status === 401 && a.body === '{"error":"Unauthorized"}') return true;
  const e = (body as { error?: Record<string, unknown> } | null)?.error;
  return (
    typeof e === 'object' &&
    e !== null &&
    typeof e.message === 'string' &&
    typeof e.type === 'string' &&
    'param' in e &&
    e.code === a.status
  );
}

const timeouts = { headersTimeoutMs: 1_000, requestTimeoutMs: 2_000 };
const keyed = await startEngineServer({
  host: '127.0.0.1',
  port: 0,
  speedup: 100,
  apiKeys: ['ek'],
  ...timeouts,
});
const open = await startEngineServer({
  host: '127.0.0.1',
  port: 0,
  speedup: 100,
  seed: 1,
  ...timeouts,
});
const gwKeyed = await startGateway({
  ...defaultConfig(),
  port: 0,
  ...timeouts,
  apiKeys: [{ key: 'ck', tenant: 'a' }],
  backends: [{ ...backendOf(keyed), apiKey: 'ek' }],
});
const gwOpen = await startGateway({
  ...defaultConfig(),
  port: 0,
  ...timeouts,
  backends: [backendOf(open)],
});
const targets: (Target & { engine: boolean })[] = [
  { name: 'engine --api-key', url: keyed.url, key: 'ek', engine: true },
  { name: 'engine', url: open.url, key: null, engine: true },
  { name: 'gateway with keys', url: gwKeyed.url, key: 'ck', engine: false },
  { name: 'gateway', url: gwOpen.url, key: null, engine: false },
];

const report: { server: string; tried: number; inShape: number; off: string[] }[] = [];
for (const t of targets) {
  const authLine = t.key ? `Authorization: Bearer ${t.key}\r\n` : '';
  const cases: [string, string][] = [
    ...HTTP_CASES.map(([name, method, path, body]): [string, string] => [
      name,
      request(method, path, body, hdr(authLine)),
    ]),
    ...RAW_CASES.map(([name, make]): [string, string] => [name, make(authLine)]),
  ];
  if (t.key) {
    const body = completion({});
    cases.push(
      ['no key', request('POST', '/v1/completions', body, {})],
      ['wrong key', request('POST', '/v1/completions', body, { Authorization: 'Bearer nope' })],
      [
        'Basic scheme',
        request('POST', '/v1/completions', body, { Authorization: `Basic ${t.key}` }),
      ],
      ['key on /v1/models missing', request('GET', '/v1/models', null, {})],
    );
  }
  const off: string[] = [];
  for (const [name, data] of cases) {
    const a = await raw(t.url, data);
    if (!inShape(a, t.engine))
      off.push(`${name}: ${a.status} ${JSON.stringify(a.body.slice(0, 80))}`);
  }
  report.push({ server: t.name, tried: cases.length, inShape: cases.length - off.length, off });
}
await gwKeyed.close();
await gwOpen.close();
await keyed.close();
await open.close();

const tried = report.reduce((a, r) => a + r.tried, 0);
const good = report.reduce((a, r) => a + r.inShape, 0);
if (json) console.log(JSON.stringify({ tried, inShape: good, servers: report }));
else {
  console.log(`hostile inputs: ${tried} tried, ${good} answered in shape`);
  for (const r of report) {
    console.log(`  ${r.server.padEnd(18)} ${r.inShape}/${r.tried}`);
    for (const o of r.off) console.log(`    not in shape: ${o}`);
  }
}
