/**
 * A data plane for `kvroute epp` in the tests, so the `openai` client can be pointed at it: an
 * HTTP server on 127.0.0.1 that plays Envoy's ext_proc filter (FULL_DUPLEX_STREAMED both ways,
 * test/support/envoy.ts, messages by field number) for each request: headers and body to the
 * picker, an immediate response answered as the picker wrote it, else the (possibly rewritten)
 * body forwarded to the endpoint it named, the response's headers and body through the picker,
 * and what the picker lets out written to the client as it comes. A client that goes away
 * cancels the ext_proc stream, as Envoy does. Loopback only; every wait is bounded.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import {
  EnvoyStream,
  envoyClient,
  httpBody,
  httpHeaders,
  requestHeaders,
  setHeader,
  statusCodeOf,
} from './envoy.ts';

/** Request headers the client may send on to the picker (the Gateway's own, as a tenant). */
const PASSED_HEADERS = ['x-kvroute-tenant', 'x-kvroute-priority', 'x-request-id'];
const ANSWER_TIMEOUT_MS = 120_000;

export interface EppProxy {
  url: string;
  close(): Promise<void>;
}

export async function startEppProxy(eppAddress: string): Promise<EppProxy> {
  const client = envoyClient(eppAddress);
  const server: Server = createServer((req, res) => {
    serve(client, req, res).catch((err) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(String(err));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      client.close();
    },
  };
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

async function serve(
  client: ReturnType<typeof envoyClient>,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const path = req.url ?? '/';
  const body = await readBody(req);
  const stream = new EnvoyStream(client);
  const upstream = new AbortController();
  let done = false;
  res.on('close', () => {
    if (done) return;
    // The client went away: Envoy cancels the ext_proc stream and the upstream request.
    upstream.abort();
    stream.cancel();
  });
  const headers: Record<string, string> = {};
  for (const name of PASSED_HEADERS) {
    const v = req.headers[name];
    if (typeof v === 'string') headers[name] = v;
  }
  stream.send(requestHeaders(path, { headers }));
  stream.send({ 4: httpBody(body, true) });
  const first = await stream.next(ANSWER_TIMEOUT_MS);
  if (first === null) throw new Error('the picker closed the stream unanswered');
  if (first.response === 'immediate_response') {
    const ir = first.immediate_response;
    const out: Record<string, string> = { 'content-type': 'application/json' };
    for (const h of ir.headers?.set_headers ?? []) {
      out[h.header.key] = Buffer.from(h.header.raw_value).toString();
    }
    done = true;
    res.writeHead(statusCodeOf(ir.status.code), out).end(Buffer.from(ir.body));
    return;
  }
  const endpoint = setHeader(first.request_headers, 'x-gateway-destination-endpoint');
  if (endpoint === undefined) throw new Error('no endpoint named');
  const forwarded: Buffer[] = [];
  for (;;) {
    const r = await stream.next(ANSWER_TIMEOUT_MS);
    const s = r.request_body.response.body_mutation.streamed_response;
    forwarded.push(Buffer.from(s.body));
    if (s.end_of_stream) break;
  }
  const answer = await fetch(`http://${endpoint}${path}`, {
    method: req.method ?? 'POST',
    headers: { 'content-type': 'application/json' },
    body: Buffer.concat(forwarded),
    signal: upstream.signal,
  });
  const contentType = answer.headers.get('content-type') ?? '';
  stream.send({
    3: httpHeaders({ ':status': String(answer.status), 'content-type': contentType }),
  });
  const head = await stream.next(ANSWER_TIMEOUT_MS);
  const replica = setHeader(head.response_headers, 'x-kvroute-replica');
  res.writeHead(answer.status, {
    'content-type': contentType,
    ...(replica !== undefined && { 'x-kvroute-replica': replica }),
  });
  // What the picker lets out, written as it comes (a JSON answer at the end, a stream by event).
  const relayed = (async () => {
    for (;;) {
      const r = await stream.next(ANSWER_TIMEOUT_MS);
      if (r === null) return;
      const s = r.response_body.response.body_mutation.streamed_response;
      if (s.body.length > 0) res.write(Buffer.from(s.body));
      if (s.end_of_stream) return;
    }
  })();
  const reader = answer.body!.getReader();
  for (;;) {
    const { value, done: last } = await reader.read();
    stream.send({ 5: httpBody(Buffer.from(value ?? []), last) });
    if (last) break;
  }
  await relayed;
  done = true;
  stream.end();
  res.end();
}
