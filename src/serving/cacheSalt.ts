/**
 * A tenant's cache salt as the engine sees it: combined with the request's own `cache_salt` in a
 * form that cannot be confused with any other pair, and written into the forwarded body without
 * re-serializing what the gateway does not own (a field nested thousands deep would overflow
 * `JSON.stringify`; the client's bytes, number spellings and key order all go through as sent).
 */
import { ApiError } from '../openai/errors.ts';

/**
 * The salt both the router's block keys and the engine use for a tenant's request: a JSON array
 * of strings, so (tenant salt, request salt) -> string is one-to-one. A separator would not be:
 * tenant `a` with salt `b/x` and tenant `a/b` with salt `x` both made `tenant:a/b/x`.
 */
export function tenantCacheSalt(tenantSalt: string, requestSalt: string | null): string {
  return JSON.stringify(requestSalt === null ? [tenantSalt] : [tenantSalt, requestSalt]);
}

const QUOTE = '"'.charCodeAt(0);
const BACKSLASH = '\\'.charCodeAt(0);
const COLON = ':'.charCodeAt(0);
const COMMA = ','.charCodeAt(0);
const OPEN_OBJECT = '{'.charCodeAt(0);
const CLOSE_OBJECT = '}'.charCodeAt(0);
const OPEN_ARRAY = '['.charCodeAt(0);
const CLOSE_ARRAY = ']'.charCodeAt(0);
const KEY = Buffer.from('"cache_salt"');

/**
 * `raw` (a JSON object, already parsed once, so known valid) with every top-level `cache_salt`
 * value replaced by `salt`, or `"cache_salt"` inserted first when there is none. Replacing every
 * occurrence makes the gateway's value the one any parser keeps, whichever duplicate it prefers.
 * Nested values are skipped by a flat scan (strings and bracket depth), never recursed into.
 */
export function withCacheSalt(raw: Buffer, salt: string): Buffer {
  const value = Buffer.from(JSON.stringify(salt));
  const scan = new Scanner(raw);
  const spans: [start: number, end: number][] = [];
  let at = scan.ws(0);
  scan.expect(at, OPEN_OBJECT);
  const open = at;
  at = scan.ws(at + 1);
  const empty = raw[at] === CLOSE_OBJECT;
  while (!empty) {
    scan.expect(at, QUOTE);
    const keyEnd = scan.string(at);
    const isSalt = scan.isCacheSaltKey(at, keyEnd);
    at = scan.ws(keyEnd);
    scan.expect(at, COLON);
    const valueStart = scan.ws(at + 1);
    const valueEnd = scan.value(valueStart);
    if (isSalt) spans.push([valueStart, valueEnd]);
    at = scan.ws(valueEnd);
    if (raw[at] === CLOSE_OBJECT) break;
    scan.expect(at, COMMA);
    at = scan.ws(at + 1);
  }
  if (spans.length === 0) {
    const field = Buffer.concat([KEY, Buffer.from(':'), value, Buffer.from(empty ? '' : ',')]);
    return Buffer.concat([raw.subarray(0, open + 1), field, raw.subarray(open + 1)]);
  }
  const parts: Buffer[] = [];
  let from = 0;
  for (const [start, end] of spans) {
    parts.push(raw.subarray(from, start), value);
    from = end;
  }
  parts.push(raw.subarray(from));
  return Buffer.concat(parts);
}

/** Byte-level moves over valid JSON; a byte out of place is a 400, never a crash. */
class Scanner {
  constructor(readonly b: Buffer) {}

  ws(at: number): number {
    let i = at;
    for (;;) {
      const c = this.b[i];
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) return i;
      i++;
    }
  }

  expect(at: number, byte: number): void {
    if (this.b[at] !== byte) {
      throw new ApiError('ERR_BAD_JSON', `request body is not a JSON object (byte ${at})`);
    }
  }

  /** From an opening quote to just past its closing quote. */
  string(at: number): number {
    const b = this.b;
    let i = at + 1;
    while (i < b.length && b[i] !== QUOTE) i += b[i] === BACKSLASH ? 2 : 1;
    if (i >= b.length) this.expect(i, QUOTE);
    return i + 1;
  }

  /** From a value's first byte to just past its end; containers by depth, not recursion. */
  value(at: number): number {
    const b = this.b;
    const first = b[at];
    if (first === QUOTE) return this.string(at);
    if (first !== OPEN_OBJECT && first !== OPEN_ARRAY) {
      let i = at;
      while (i < b.length && !isValueEnd(b[i]!)) i++;
      return i;
    }
    let depth = 0;
    let i = at;
    while (i < b.length) {
      const c = b[i]!;
      if (c === QUOTE) {
        i = this.string(i);
        continue;
      }
      if (c === OPEN_OBJECT || c === OPEN_ARRAY) depth++;
      else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
        depth--;
        if (depth === 0) return i + 1;
      }
      i++;
    }
    this.expect(i, CLOSE_OBJECT);
    return i;
  }

  /** Whether the key string in [start, end) reads `cache_salt` (escapes decoded). */
  isCacheSaltKey(start: number, end: number): boolean {
    const key = this.b.subarray(start, end);
    if (key.equals(KEY)) return true;
    if (!key.includes(BACKSLASH)) return false;
    return JSON.parse(key.toString('utf8')) === 'cache_salt';
  }
}

function isValueEnd(c: number): boolean {
  return (
    c === COMMA ||
    c === CLOSE_OBJECT ||
    c === CLOSE_ARRAY ||
    c === 0x20 ||
    c === 0x09 ||
    c === 0x0a ||
    c === 0x0d
  );
}
