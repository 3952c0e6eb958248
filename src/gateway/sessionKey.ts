/**
 * A request's session key for session affinity (src/router/sessionMap.ts), in this order:
 *   1. the session header (`--session-header`, default `x-session-id`),
 *   2. the body's `session_id` (as SGLang's router and several agent frameworks send it),
 *   3. the body's `user` (OpenAI's end-user id, the field clients already set per conversation
 *      owner).
 * An empty value counts as absent; a non-string body field is a 400 (optString). Keys longer
 * than MAX_SESSION_KEY_CHARS are cut there, so a client cannot grow the map's memory per entry.
 */
import type { IncomingMessage } from 'node:http';
import { asObject, optString } from '../openai/fields.ts';

export const MAX_SESSION_KEY_CHARS = 256;

export function sessionKey(
  req: IncomingMessage,
  header: string,
  json: unknown,
): string | undefined {
  const raw = req.headers[header];
  const fromHeader = Array.isArray(raw) ? raw[0] : raw;
  const body = asObject(json);
  const key =
    nonEmpty(fromHeader) ??
    nonEmpty(optString(body, 'session_id')) ??
    nonEmpty(optString(body, 'user'));
  return key === undefined ? undefined : key.slice(0, MAX_SESSION_KEY_CHARS);
}

function nonEmpty(v: string | null | undefined): string | undefined {
  return v === null || v === undefined || v.length === 0 ? undefined : v;
}
