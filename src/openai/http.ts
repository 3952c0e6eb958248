/**
 * node:http plumbing both servers share: a bounded body reader, JSON and error writers, path
 * routing with 404/405 answers, listening on / closing a server, and the answers node's own
 * parser would give with an empty body (400, 408, 417, 431, CONNECT) written in the error shape.
 */
import {
  createServer,
  type IncomingMessage,
  type RequestListener,
  STATUS_CODES,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { ApiError, errorResponse } from './errors.ts';
import { decodeUtf8 } from './utf8.ts';

/**
 * A body in a coding the servers do not decode is refused (415) rather than read as plain
 * bytes: any Transfer-Encoding but `chunked` alone (node's parser accepts `gzip, chunked` and
 * hands over the still-gzipped bytes), any Content-Encoding but `identity`.
 */
export function checkBodyCoding(req: IncomingMessage): void {
  const te = req.headers['transfer-encoding'];
  if (te !== undefined && te.trim().toLowerCase() !== 'chunked') {
    throw new ApiError(
      'ERR_UNSUPPORTED_ENCODING',
      `Transfer-Encoding '${te}' is not supported: send the body chunked or with Content-Length`,
    );
  }
  const ce = req.headers['content-encoding'];
  if (ce !== undefined && ce.trim().toLowerCase() !== 'identity') {
    throw new ApiError(
      'ERR_UNSUPPORTED_ENCODING',
      `Content-Encoding '${ce}' is not supported: send the body uncompressed`,
    );
  }
}

/**
 * Reads the whole body; refuses one above `limitBytes` with 413 without buffering the rest, one
 * in a coding it does not decode with 415, and a client that closes before the end with 408.
 */
export function readBody(req: IncomingMessage, limitBytes: number): Promise<Buffer> {
  try {
    checkBodyCoding(req);
  } catch (err) {
    return Promise.reject(err);
  }
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limitBytes) {
    req.resume();
    return Promise.reject(tooLarge(limitBytes));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    // Methods, not arrow functions: the TypeScript loader names each arrow function it makes
    // with a property definition (esbuild's keepNames), here once per request.
    const on = {
      data(chunk: Buffer): void {
        size += chunk.length;
        if (size > limitBytes) {
          req.off('data', on.data);
          req.resume();
          reject(tooLarge(limitBytes));
          return;
        }
        chunks.push(chunk);
      },
      gone(cause?: Error): void {
        reject(
          new ApiError('ERR_CLIENT_TIMEOUT', 'client closed before the body ended', null, {
            cause,
          }),
        );
      },
    };
    req.on('data', on.data);
    req.once('end', () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)));
    req.once('error', on.gone);
    req.once('close', () => {
      if (!req.complete) on.gone();
    });
  });
}

const tooLarge = (limitBytes: number): ApiError =>
  new ApiError('ERR_BODY_TOO_LARGE', `request body is larger than ${limitBytes} bytes`);

export function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(decodeUtf8(body));
  } catch (err) {
    throw new ApiError('ERR_BAD_JSON', `request body is not valid JSON: ${(err as Error).message}`);
  }
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

/** The one error writer; a response already under way can only be cut. */
export function sendError(res: ServerResponse, err: ApiError): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const { status, headers, body } = errorResponse(err);
  // After a 413 or 415 the rest of the body is not worth reading: close instead of draining it.
  if (status === 413 || status === 415) headers.connection = 'close';
  res.writeHead(status, { ...headers, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

export type Method = 'GET' | 'POST' | 'DELETE';

export interface Route {
  /** The method the path answers, or several (the handler tells them apart). */
  method: Method | readonly Method[];
}

/** The route for the request's path; 404 for an unknown path, 405 (with Allow) for a method. */
export function findRoute<R extends Route>(
  routes: Readonly<Record<string, R>>,
  req: IncomingMessage,
  res: ServerResponse,
): R {
  const path = (req.url ?? '/').split('?')[0]!;
  const method = req.method ?? 'GET';
  const route = Object.hasOwn(routes, path) ? routes[path] : undefined;
  if (!route) throw new ApiError('ERR_ROUTE_NOT_FOUND', `no route for ${method} ${path}`);
  const allowed: readonly string[] =
    typeof route.method === 'string' ? [route.method] : route.method;
  if (!allowed.includes(method) && !(allowed.includes('GET') && method === 'HEAD')) {
    res.setHeader('allow', allowed.join(', '));
    throw new ApiError('ERR_METHOD_NOT_ALLOWED', `${method} is not allowed on ${path}`);
  }
  return route;
}

export interface ServerTimeouts {
  /** A client must send its whole request head within this (slowloris). */
  headersTimeoutMs: number;
  /** ... and its whole request, body included, within this. A response may take any time. */
  requestTimeoutMs: number;
}

/**
 * How often node looks for connections past those limits. Its default (30 s) let a 10 s header
 * limit run to 24 s; at this period a connection is closed within a quarter second of its limit.
 */
const CONNECTIONS_CHECK_MS = 250;

/**
 * How long an idle keep-alive connection stays open, sent to clients as `Keep-Alive: timeout=65`.
 * Node's default (5 s) sits just above the usual client pools' 4 s, so on a busy host a client
 * can reuse a socket at the moment the server closes it, and its POST fails with a reset before
 * any response byte. Clients close on the hint, before the server does; 65 s is above the idle
 * timeouts of the load balancers put in front (an ALB's 60 s), as nginx's 75 s is.
 */
export const IDLE_KEEP_ALIVE_MS = 65_000;

/**
 * A keep-alive HTTP server that enforces its timeouts on time and answers a client that
 * half-closes its socket after sending its request (node's default drops that request).
 */
export function createHttpServer(timeouts: ServerTimeouts, listener: RequestListener): Server {
  const server = createServer(
    {
      keepAlive: true,
      headersTimeout: timeouts.headersTimeoutMs,
      requestTimeout: timeouts.requestTimeoutMs,
      connectionsCheckingInterval: Math.min(
        CONNECTIONS_CHECK_MS,
        timeouts.headersTimeoutMs,
        timeouts.requestTimeoutMs,
      ),
    },
    listener,
  );
  // node:http's own switch (net's allowHalfOpen is already on): after the client's FIN, finish
  // the responses in progress and then end the socket, instead of aborting them.
  (server as Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
  server.keepAliveTimeout = IDLE_KEEP_ALIVE_MS;
  answerParserErrors(server);
  return server;
}

/**
 * What node answers on its own with an empty body, answered in the error shape instead:
 * - parser errors (`clientError`): a header block over node's limit 431, the request timeout
 *   408, any other (`Content-Length: -1`, a broken chunk, a bad request line) 400; the
 *   connection is closed after it, as node does;
 * - an `Expect` other than `100-continue` (`checkExpectation`): 417;
 * - CONNECT (node closes the socket without a word when nobody listens): 405.
 */
function answerParserErrors(server: Server): void {
  server.on('clientError', (err: Error & { code?: string }, socket: Duplex) => {
    const pending = (socket as Socket & { _httpMessage?: ServerResponse })._httpMessage;
    if (err.code === 'ECONNRESET' || !socket.writable || pending?.headersSent) {
      socket.destroy();
      return;
    }
    writeRaw(socket, parserError(err));
  });
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    sendError(
      res,
      new ApiError(
        'ERR_EXPECTATION_FAILED',
        `Expect '${req.headers.expect}' is not supported (only 100-continue)`,
      ),
    );
  });
  server.on('connect', (req: IncomingMessage, socket: Duplex) => {
    writeRaw(
      socket,
      new ApiError('ERR_METHOD_NOT_ALLOWED', `CONNECT is not allowed on ${req.url ?? '/'}`),
      { allow: 'GET, POST, DELETE' },
    );
  });
}

function parserError(err: Error & { code?: string }): ApiError {
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    return new ApiError('ERR_HEADERS_TOO_LARGE', 'request header fields are too large');
  }
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return new ApiError('ERR_CLIENT_TIMEOUT', 'the request did not arrive in time');
  }
  const reason = (err as { reason?: string }).reason ?? err.message;
  return new ApiError('ERR_BAD_REQUEST', `malformed HTTP request: ${reason}`);
}

/** A whole response written on a socket that has no ServerResponse, then the socket closed. */
function writeRaw(socket: Duplex, err: ApiError, extra: Record<string, string> = {}): void {
  const { status, headers, body } = errorResponse(err);
  const lines = Object.entries({
    ...headers,
    ...extra,
    'content-length': String(Buffer.byteLength(body)),
    connection: 'close',
  }).map(([k, v]) => `${k}: ${v}\r\n`);
  const head = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\n${lines.join('')}\r\n`;
  socket.end(head + body, () => socket.destroy());
}

/** Listens on host:port (0: a free port); resolves with the port and a connectable base URL. */
export async function listen(
  server: Server,
  port: number,
  host: string,
): Promise<{ port: number; url: string }> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = (server.address() as AddressInfo).port;
  const name = host.includes(':') ? `[${host}]` : host;
  return { port: bound, url: `http://${name === '0.0.0.0' ? '127.0.0.1' : name}:${bound}` };
}

/** Stops accepting and ends every open connection, streams included. */
export async function closeServer(server: Server): Promise<void> {
  const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeAllConnections();
  await stopped;
}
