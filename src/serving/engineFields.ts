/**
 * Response fields only the gateway reads. A prefill engine answers with `kv_transfer_params`
 * (its engine id, host, port and the ids of the blocks it holds for the decode): the gateway
 * passes them to the decode leg, and no client ever sees them. This tap takes them out of what
 * the gateway relays: a JSON answer is held whole (it arrives whole) and rewritten only when it
 * has one; a stream passes event by event, and only an event that has one is rewritten.
 */
import { eventEnd } from './audit/usageTap.ts';
import type { ResponseTap } from './responseTap.ts';

export const ENGINE_ONLY_FIELDS: readonly string[] = ['kv_transfer_params'];

const EMPTY = Buffer.alloc(0);
const KEYS = ENGINE_ONLY_FIELDS.map((f) => Buffer.from(`"${f}"`));
const LF = 0x0a;

const mentions = (buf: Buffer): boolean => KEYS.some((k) => buf.includes(k));

/** The JSON text without the engine-only top-level fields; null when it has none (or is not JSON). */
export function withoutEngineFields(text: string): string | null {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return null;
  const body = json as Record<string, unknown>;
  let found = false;
  for (const f of ENGINE_ONLY_FIELDS) {
    if (Object.hasOwn(body, f)) {
      delete body[f];
      found = true;
    }
  }
  return found ? JSON.stringify(body) : null;
}

/** The parsed JSON answer without the engine-only fields (the P/D prefill's refusal, say). */
export function stripEngineFields(body: Buffer): Buffer {
  if (!mentions(body)) return body;
  const out = withoutEngineFields(body.toString('utf8'));
  return out === null ? body : Buffer.from(out);
}

/** One SSE event without the engine-only fields of its data (the event as sent otherwise). */
function stripEvent(raw: Buffer): Buffer {
  if (!mentions(raw)) return raw;
  const lines = raw.toString('utf8').split(/\r\n|\n|\r/);
  const data = lines.filter((l) => l.startsWith('data:'));
  if (data.length !== 1) return raw;
  const out = withoutEngineFields(data[0]!.slice(data[0]!.startsWith('data: ') ? 6 : 5));
  if (out === null) return raw;
  const kept = lines.filter((l) => l !== '' && !l.startsWith('data:'));
  return Buffer.from(`${[...kept, `data: ${out}`].join('\n')}\n\n`);
}

export class EngineFieldsTap implements ResponseTap {
  #sse = false;
  #held: Buffer = EMPTY;
  /** The JSON answer's bytes so far. */
  #json: Buffer[] = [];

  start(_status: number, contentType: string): void {
    this.#sse = contentType.startsWith('text/event-stream');
  }

  data(chunk: Buffer): Buffer {
    if (!this.#sse) {
      this.#json.push(chunk);
      return EMPTY;
    }
    // The common chunk: whole events, none naming a field; it passes as it came.
    if (this.#held.length === 0 && endsEvent(chunk) && !mentions(chunk)) return chunk;
    const buf = this.#held.length > 0 ? Buffer.concat([this.#held, chunk]) : chunk;
    const out: Buffer[] = [];
    let start = 0;
    for (let end = eventEnd(buf, 0); end >= 0; end = eventEnd(buf, start)) {
      out.push(stripEvent(buf.subarray(start, end)));
      start = end;
    }
    this.#held = start < buf.length ? Buffer.from(buf.subarray(start)) : EMPTY;
    return out.length === 1 ? out[0]! : Buffer.concat(out);
  }

  end(): Buffer {
    if (this.#sse) {
      const rest = this.#held;
      this.#held = EMPTY;
      return rest.length > 0 ? stripEvent(rest) : EMPTY;
    }
    const body = Buffer.concat(this.#json);
    this.#json = [];
    if (!mentions(body)) return body;
    // Not JSON (a body cut short, say) yet naming a field: nothing of it goes out.
    const out = withoutEngineFields(body.toString('utf8'));
    if (out !== null) return Buffer.from(out);
    return isJson(body) ? body : EMPTY;
  }
}

function isJson(body: Buffer): boolean {
  try {
    JSON.parse(body.toString('utf8'));
    return true;
  } catch {
    return false;
  }
}

function endsEvent(chunk: Buffer): boolean {
  const n = chunk.length;
  return n >= 2 && chunk[n - 1] === LF && chunk[n - 2] === LF;
}
