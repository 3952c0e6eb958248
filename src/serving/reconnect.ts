/**
 * A kept-alive connection the backend closed just as a request went out on it (its idle timeout
 * fired, as llama-server's and uvicorn's do) is a race, not a dead replica: the request never
 * reached the engine. Such a failure (ECONNRESET, EPIPE, undici's `UND_ERR_SOCKET` "other side
 * closed") on a REUSED connection before any response head is retried once on a fresh connection
 * to the same replica; only a fresh connection's failure says the replica is gone.
 *
 * Whether the connection was reused: undici publishes each request's socket on the
 * `undici:client:sendHeaders` diagnostics channel, synchronously after it hands the request to
 * its handler (`onRequestStart`). An attempt registers itself there (`expectSocket`), and the
 * channel's message tells it whether its socket carried a request before.
 */
import { subscribe } from 'node:diagnostics_channel';
import type { Socket } from 'node:net';

/** Error codes and messages of a connection the other side closed or reset. */
const CLOSED_CODES = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET']);
const CLOSED_MESSAGES = ['other side closed', 'socket hang up'];

/** Whether `error` (or its cause) is a connection closed or reset by the other side. */
export function isClosedConnection(error: unknown): boolean {
  for (let e = error, depth = 0; e && depth < 4; depth++) {
    if (typeof e !== 'object') return false;
    const { code, message, cause } = e as { code?: unknown; message?: unknown; cause?: unknown };
    if (typeof code === 'string' && CLOSED_CODES.has(code)) return true;
    if (typeof message === 'string' && CLOSED_MESSAGES.some((m) => message.includes(m))) {
      return true;
    }
    e = cause;
  }
  return false;
}

/** What an attempt saw of its connection when it failed. */
export interface FailedAttempt {
  error: unknown;
  /** The connection had carried a request before this one (null: not known). */
  reused: boolean | null;
  /** A response head (status line) arrived before the failure. */
  headSeen: boolean;
}

/**
 * A kept-alive socket closed under the request: retry it once, on a fresh connection to the
 * same replica, without counting it against the replica.
 */
export function isKeepAliveRace(attempt: FailedAttempt): boolean {
  return attempt.reused === true && !attempt.headSeen && isClosedConnection(attempt.error);
}

/** An attempt waiting to learn its socket. */
export interface SocketWatcher {
  reused: boolean | null;
}

/** Sockets that have carried a request (weakly held: a closed socket is forgotten). */
const used = new WeakSet<Socket>();
let waiting: SocketWatcher | null = null;
let subscribed = false;

function onSendHeaders(message: unknown): void {
  const socket = (message as { socket?: Socket }).socket;
  if (!socket || typeof socket !== 'object') return;
  // A byte read means a response came over it before: reused, even before the tracking began.
  const reused = used.has(socket) || socket.bytesRead > 0;
  used.add(socket);
  if (waiting) {
    waiting.reused = reused;
    waiting = null;
  }
}

function clearWaiting(): void {
  waiting = null;
}

/**
 * Called from the attempt's `onRequestStart`: the socket undici writes this request to next (in
 * the same tick) is the attempt's. A request that is never written leaves nothing behind: the
 * registration lapses at the end of the tick.
 */
export function expectSocket(watcher: SocketWatcher): void {
  trackSockets();
  waiting = watcher;
  queueMicrotask(clearWaiting);
}

/** Subscribes now, so that sockets used before the first attempt are known too. */
export function trackSockets(): void {
  if (subscribed) return;
  subscribed = true;
  subscribe('undici:client:sendHeaders', onSendHeaders);
}
