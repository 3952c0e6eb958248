/**
 * A request whose answer the gateway reads whole (the P/D prefill leg), with the plain path's
 * keep-alive rule (`reconnect.ts`): a kept-alive connection the backend closed under it before
 * any response head is a race, not a dead replica, and the request goes once more over a fresh
 * connection to the same backend. Only that second failure (or any other) is the caller's.
 */
import type { Dispatcher } from 'undici';
import { type Backend, freshConnection } from '../serving/backends.ts';
import {
  type FailedAttempt,
  expectSocket,
  isKeepAliveRace,
  type SocketWatcher,
} from '../serving/reconnect.ts';

export interface BufferedRequest {
  path: string;
  method: 'POST';
  headers: Record<string, string>;
  body: string;
  headersTimeout: number;
}

export interface BufferedAnswer {
  statusCode: number;
  body: Buffer;
}

/** An attempt that failed, with what it saw of its connection. */
class AttemptFailed extends Error {
  readonly attempt: FailedAttempt;
  constructor(attempt: FailedAttempt) {
    super((attempt.error as Error)?.message ?? String(attempt.error), { cause: attempt.error });
    this.attempt = attempt;
  }
}

/** One attempt over `dispatcher`; rejects with an AttemptFailed (its cause the error). */
function attempt(dispatcher: Dispatcher, request: BufferedRequest): Promise<BufferedAnswer> {
  return new Promise((resolve, reject) => {
    const socket: SocketWatcher = { reused: null };
    const chunks: Buffer[] = [];
    let status = 0;
    let settled = false;
    const fail = (error: unknown) => {
      if (settled) return;
      settled = true;
      reject(new AttemptFailed({ error, reused: socket.reused, headSeen: status !== 0 }));
    };
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart() {
        expectSocket(socket);
      },
      onResponseStart(_c, statusCode) {
        status = statusCode;
      },
      onResponseData(_c, data) {
        chunks.push(data);
      },
      onResponseEnd() {
        if (settled) return;
        settled = true;
        resolve({ statusCode: status, body: Buffer.concat(chunks) });
      },
      onResponseError(_c, error) {
        fail(error);
      },
    };
    try {
      dispatcher.dispatch(
        {
          path: request.path,
          method: request.method,
          headers: request.headers,
          body: request.body,
          headersTimeout: request.headersTimeout,
        },
        handler,
      );
    } catch (error) {
      fail(error);
    }
  });
}

/**
 * The request on `backend`'s pooled connections; after a keep-alive race (`onReconnect` told
 * first), once more on a fresh connection. Rejects with the failure's own error.
 */
export async function bufferedRequest(
  backend: Backend,
  request: BufferedRequest,
  onReconnect: (error: Error) => void,
): Promise<BufferedAnswer> {
  try {
    return await attempt(backend.pool, request);
  } catch (err) {
    const failed = err as AttemptFailed;
    if (!(failed instanceof AttemptFailed)) throw err;
    if (!isKeepAliveRace(failed.attempt)) throw failed.attempt.error;
    onReconnect(failed.attempt.error as Error);
  }
  const fresh = freshConnection(backend);
  try {
    return await attempt(fresh, request);
  } catch (err) {
    throw err instanceof AttemptFailed ? err.attempt.error : err;
  } finally {
    void fresh.close().catch(() => {});
  }
}
