/**
 * One proxied attempt: the request goes to one backend over its pooled keep-alive connections,
 * and the response comes back to the client byte for byte. The status line and headers are held
 * until the first body byte, so a backend that refuses or resets before then is a clean failure
 * the caller can retry elsewhere; after it, an SSE stream is closed with an error event and
 * `[DONE]`, never left hanging. Backpressure is per request: a slow client pauses only its own
 * upstream response.
 */
import type { IncomingHttpHeaders, ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import { ApiError, errorInfo } from '../openai/errors.ts';
import { SSE_DONE, sseData } from '../openai/sse.ts';
import { type Backend, freshConnection } from '../serving/backends.ts';
import { FirstTokenDetector } from '../serving/firstToken.ts';
import { expectSocket, isKeepAliveRace, type SocketWatcher } from '../serving/reconnect.ts';
import type { ResponseTap } from '../serving/responseTap.ts';

export type AttemptOutcome =
  /**
   * Nothing reached the client: the backend refused, reset or failed before any byte. `reused`:
   * the connection had carried a request before (null: not known); `headSeen`: a status line came.
   */
  | { kind: 'unreachable'; error: Error; reused: boolean | null; headSeen: boolean }
  /** The backend's whole response (any status) went to the client. */
  | { kind: 'completed'; status: number }
  /** The client left; the upstream request was aborted. */
  | { kind: 'client-gone' }
  /** The backend failed after bytes went out; the client got an error event or a cut. */
  | { kind: 'broken'; error: Error }
  /** The backend sent nothing within the first-byte timeout and was given up on. */
  | { kind: 'silent'; error: Error };

export interface AttemptHooks {
  /** The first generated token is on its way to the client (or a whole non-streamed answer). */
  onFirstToken(): void;
  /** No response head from the backend after this long: ask `onSilence`. */
  firstByteTimeoutMs: number;
  /** Whether to give the attempt up (true) or keep waiting for the backend (false). */
  onSilence(): Promise<boolean>;
  /** Sees (and may hold back or drop) the response's bytes: the audit's usage reader. */
  tap?: ResponseTap;
}

export interface UpstreamRequest {
  path: string;
  body: Buffer;
  headers: Record<string, string>;
  /** Added to the client's response headers (which replica served it). */
  replyHeaders?: Record<string, string>;
}

/** Response headers that describe one hop, not the message (RFC 9110 section 7.6.1). */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'proxy-connection',
  'proxy-authenticate',
  'te',
  'trailer',
  'upgrade',
]);

/**
 * The headers to pass on: all but the hop-by-hop ones, which are the list above and whatever the
 * message's own Connection field names (RFC 9110 section 7.6.1: a proxy removes those too).
 */
export function copyableHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const connection = headers.connection;
  const named = connection === undefined ? null : connectionNames(connection);
  const out: Record<string, string | string[]> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || HOP_BY_HOP.has(name)) continue;
    if (named?.has(name)) continue;
    out[name] = value;
  }
  return out;
}

/** The field names a Connection header lists, lower-cased. */
function connectionNames(connection: string | string[]): Set<string> {
  const named = new Set<string>();
  for (const field of Array.isArray(connection) ? connection : [connection]) {
    for (const v of field.split(',')) {
      const name = v.trim().toLowerCase();
      if (name !== '') named.add(name);
    }
  }
  return named;
}

class ClientGone extends Error {
  readonly code = 'ERR_CLIENT_GONE';
}

export class FirstByteTimeout extends Error {
  readonly code = 'ERR_FIRST_BYTE_TIMEOUT';
}

export function proxyAttempt(
  dispatcher: Dispatcher,
  upstream: UpstreamRequest,
  res: ServerResponse,
  hooks: AttemptHooks,
): Promise<AttemptOutcome> {
  return new Promise<AttemptOutcome>((resolve) => {
    const attempt = new ProxiedAttempt(upstream, res, hooks, resolve);
    if (!attempt.watchClient()) return;
    try {
      dispatcher.dispatch(
        { path: upstream.path, method: 'POST', headers: upstream.headers, body: upstream.body },
        attempt,
      );
    } catch (error) {
      attempt.settle({ kind: 'unreachable', error: error as Error, reused: null, headSeen: false });
    }
  });
}

/**
 * One attempt's state, and the dispatch handler that passes the backend's response on to the
 * client. Its callbacks are methods bound once, not arrow functions: the TypeScript loader
 * (esbuild's keepNames) names every arrow function with a property definition each time one is
 * made, once per request.
 */
class ProxiedAttempt implements Dispatcher.DispatchHandler {
  readonly #upstream: UpstreamRequest;
  readonly #res: ServerResponse;
  readonly #hooks: AttemptHooks;
  readonly #resolve: (outcome: AttemptOutcome) => void;
  #controller: Dispatcher.DispatchController | null = null;
  #status = 0;
  #headers: Record<string, string | string[]> = {};
  #isSse = false;
  #headWritten = false;
  /** A tap holds body bytes the backend sent: the answer has begun, even if none went out. */
  #tapHolds = false;
  #settled = false;
  #clientGone = false;
  /** Whether the bytes sent so far end on an event boundary (an error event may follow). */
  #atEventBoundary = true;
  readonly #detector = new FirstTokenDetector();
  readonly #socket: SocketWatcher = { reused: null };
  #silenceTimer: NodeJS.Timeout | null = null;
  // Chunks (and the end) that arrive in one tick leave in one write: a short answer that
  // arrives whole costs one syscall instead of three; a stream's chunks are not delayed.
  #corked = false;

  constructor(
    upstream: UpstreamRequest,
    res: ServerResponse,
    hooks: AttemptHooks,
    resolve: (outcome: AttemptOutcome) => void,
  ) {
    this.#upstream = upstream;
    this.#res = res;
    this.#hooks = hooks;
    this.#resolve = resolve;
    this.onClientClose = this.onClientClose.bind(this);
    this.onDrain = this.onDrain.bind(this);
    this.uncork = this.uncork.bind(this);
    this.onSilence = this.onSilence.bind(this);
    this.giveUpIfSilent = this.giveUpIfSilent.bind(this);
  }

  /**
   * Starts the first-byte timer and watches the client; false when the client is already gone
   * (the attempt is then settled).
   */
  watchClient(): boolean {
    // Nothing from the backend, not even a status line, is a frozen or lost engine or a long
    // non-streamed generation; the caller tells which (by probing) before anything is cut.
    this.#silenceTimer = setTimeout(this.onSilence, this.#hooks.firstByteTimeoutMs);
    this.#res.on('close', this.onClientClose);
    if (this.#res.destroyed) {
      this.onClientClose();
      return false;
    }
    return true;
  }

  settle(outcome: AttemptOutcome): void {
    if (this.#settled) return;
    this.#settled = true;
    if (this.#silenceTimer) clearTimeout(this.#silenceTimer);
    this.#res.off('close', this.onClientClose);
    this.#resolve(outcome);
  }

  onClientClose(): void {
    if (this.#res.writableFinished) return;
    this.#clientGone = true;
    this.#controller?.abort(new ClientGone('client closed the connection'));
    this.settle({ kind: 'client-gone' });
  }

  onSilence(): void {
    this.#silenceTimer = null;
    this.#hooks.onSilence().then(this.giveUpIfSilent);
  }

  giveUpIfSilent(giveUp: boolean): void {
    if (!giveUp || this.#settled || this.#status !== 0) return;
    const error = new FirstByteTimeout(
      `no response from the backend within ${this.#hooks.firstByteTimeoutMs} ms`,
    );
    this.settle({ kind: 'silent', error });
    this.#controller?.abort(error);
  }

  writeHead(): void {
    this.#headWritten = true;
    this.#res.writeHead(this.#status, this.#headers);
  }

  onDrain(): void {
    this.#controller?.resume();
  }

  uncork(): void {
    this.#corked = false;
    this.#res.uncork();
  }

  onRequestStart(c: Dispatcher.DispatchController): void {
    this.#controller = c;
    expectSocket(this.#socket);
    if (this.#clientGone || this.#settled) c.abort(new ClientGone('the attempt was given up'));
  }

  onResponseStart(
    _c: Dispatcher.DispatchController,
    statusCode: number,
    responseHeaders: IncomingHttpHeaders,
  ): void {
    this.#status = statusCode;
    if (this.#silenceTimer) clearTimeout(this.#silenceTimer);
    this.#headers = copyableHeaders(responseHeaders);
    if (this.#upstream.replyHeaders) Object.assign(this.#headers, this.#upstream.replyHeaders);
    const type = String(responseHeaders['content-type'] ?? '');
    this.#isSse = type.startsWith('text/event-stream');
    this.#hooks.tap?.start(statusCode, type);
    // A non-streamed answer comes back whole: its first token is already generated.
    if (!this.#isSse && statusCode < 400) this.#hooks.onFirstToken();
  }

  onResponseData(c: Dispatcher.DispatchController, data: Buffer): void {
    if (this.#clientGone) return;
    const hooks = this.#hooks;
    const res = this.#res;
    const chunk = hooks.tap ? hooks.tap.data(data) : data;
    if (chunk.length === 0) {
      if (data.length > 0) this.#tapHolds = true;
      return;
    }
    if (!this.#headWritten) this.writeHead();
    if (!this.#corked) {
      this.#corked = true;
      res.cork();
      process.nextTick(this.uncork);
    }
    if (this.#isSse) {
      if (!this.#detector.done && this.#detector.feed(chunk)) hooks.onFirstToken();
      this.#atEventBoundary = endsEvent(chunk);
    }
    if (!res.write(chunk)) {
      c.pause();
      res.once('drain', this.onDrain);
    }
  }

  onResponseEnd(): void {
    if (this.#clientGone) return;
    const rest = this.#hooks.tap?.end();
    if (!this.#headWritten) {
      // Nothing went out yet, so `rest` is the whole body: a tap may have rewritten it.
      if (this.#headers['content-length'] !== undefined) {
        this.#headers['content-length'] = String(rest?.length ?? 0);
      }
      this.writeHead();
    }
    if (rest && rest.length > 0) this.#res.write(rest);
    this.#res.end();
    this.settle({ kind: 'completed', status: this.#status });
  }

  onResponseError(_c: Dispatcher.DispatchController, error: Error): void {
    if (this.#settled) return;
    if (this.#clientGone || error instanceof ClientGone) {
      this.settle({ kind: 'client-gone' });
      return;
    }
    if (!this.#headWritten && !this.#tapHolds) {
      const headSeen = this.#status !== 0;
      this.settle({ kind: 'unreachable', error, reused: this.#socket.reused, headSeen });
      return;
    }
    // Bytes came (a tap held them): not retried, as if they had gone out; the client sees
    // the cut.
    if (!this.#headWritten) this.writeHead();
    const res = this.#res;
    const rest = this.#hooks.tap?.end();
    if (rest && rest.length > 0) this.#atEventBoundary = endsEvent(rest);
    if (this.#isSse) {
      if (rest && rest.length > 0) res.write(rest);
      endWithErrorEvent(res, error, this.#atEventBoundary);
    } else if (rest && rest.length > 0) {
      // What was held leaves before the cut, as it would have unheld.
      res.write(rest, () => res.destroy(error));
    } else res.destroy(error);
    this.settle({ kind: 'broken', error });
  }
}

/** Whether `bytes` end on an SSE event boundary (a blank line). */
function endsEvent(bytes: Buffer): boolean {
  return bytes.length >= 2 && bytes[bytes.length - 1] === 10 && bytes[bytes.length - 2] === 10;
}

/**
 * One attempt on `backend` over its pooled connections; when the backend closed a kept-alive
 * connection under it (`reconnect.ts`), once more over a fresh connection to the same backend
 * (`onReconnect` told first). `hooks` is asked for each of the two: a tap reads one response.
 */
export async function proxyToBackend(
  backend: Backend,
  upstream: UpstreamRequest,
  res: ServerResponse,
  hooks: () => AttemptHooks,
  onReconnect: (error: Error) => void,
): Promise<AttemptOutcome> {
  const outcome = await proxyAttempt(backend.pool, upstream, res, hooks());
  if (outcome.kind !== 'unreachable' || !isKeepAliveRace(outcome)) return outcome;
  onReconnect(outcome.error);
  const fresh = freshConnection(backend);
  try {
    return await proxyAttempt(fresh, upstream, res, hooks());
  } finally {
    void fresh.close().catch(() => {});
  }
}

/** Ends a begun SSE stream the way an OpenAI server reports a failure mid-stream. */
export function endWithErrorEvent(res: ServerResponse, cause: Error, atEventBoundary = true): void {
  const err = new ApiError('ERR_UPSTREAM', `upstream failed mid-stream: ${cause.message}`, null, {
    cause,
  });
  if (!res.writableEnded) {
    // A blank line first terminates any event the backend left half-written.
    const lead = atEventBoundary ? '' : '\n\n';
    res.end(`${lead}${sseData({ error: errorInfo(err) })}${SSE_DONE}`);
  }
}
