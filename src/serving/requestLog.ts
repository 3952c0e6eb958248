/**
 * Request ids and the access log. Every request gets an id: the client's `X-Request-Id` when it
 * sends a sane one, a fresh UUID otherwise; it is returned in the response headers, passed to
 * the backend (vLLM takes the same header) and put on every log line about the request. The
 * access line, when on, says who asked, where it went and how it went.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from './log.ts';

export const REQUEST_ID_HEADER = 'x-request-id';

/** Printable ASCII without spaces, bounded: an id that is safe to echo and to log. */
const SANE_ID = /^[\x21-\x7e]{1,200}$/;

export function requestIdOf(req: IncomingMessage): string {
  const given = req.headers[REQUEST_ID_HEADER];
  const id = Array.isArray(given) ? given[0] : given;
  return id !== undefined && SANE_ID.test(id) ? id : randomUUID();
}

/** What the generate path learned about a request, for its access line. */
export interface RequestRecord {
  id: string;
  tenant: string | null;
  model: string | null;
  /** The replica that served it last (after retries). */
  replica: string | null;
  /** Prompt tokens cached on that replica, as the router saw it when routing. */
  cachedTokens: number | null;
  promptTokens: number | null;
  /** From the request's arrival to its first token leaving for the client. */
  ttftMs: number | null;
  /** From the request's arrival to its first upstream call (null: it never got that far). */
  preUpstreamMs: number | null;
  attempts: number;
}

export function newRecord(id: string): RequestRecord {
  return {
    id,
    tenant: null,
    model: null,
    replica: null,
    cachedTokens: null,
    promptTokens: null,
    ttftMs: null,
    preUpstreamMs: null,
    attempts: 0,
  };
}

/** One access line when the response is over (finished, or cut by either side). */
export function logAccessWhenDone(
  logger: Logger,
  req: IncomingMessage,
  res: ServerResponse,
  record: RequestRecord,
  startedMs: number,
): void {
  res.once('close', () => {
    logger.info(
      {
        reqId: record.id,
        method: req.method,
        path: req.url,
        status: res.statusCode,
        completed: res.writableFinished,
        tenant: record.tenant,
        model: record.model,
        replica: record.replica,
        promptTokens: record.promptTokens,
        cachedTokens: record.cachedTokens,
        ttftMs: record.ttftMs === null ? null : Math.round(record.ttftMs),
        durationMs: Math.round(performance.now() - startedMs),
        attempts: record.attempts,
      },
      'request',
    );
  });
}
