/**
 * Reads what the engine reported it reused (`usage.prompt_tokens_details.cached_tokens`) off a
 * response as it passes through the proxy, and, when the gateway asked upstream for usage on the
 * client's behalf (`stream_options.include_usage`), takes the usage event out of the stream so
 * the client gets exactly the bytes it would have got without it.
 *
 * - A stream the client asked usage for, or a JSON answer: every byte passes at once; a copy is
 *   framed (`SseFramer`) or kept (up to MAX_JSON_BYTES) to read the usage.
 * - A stream the gateway asked usage for: bytes pass event by event (an event's bytes are held
 *   until its blank line), each event verbatim except the one with `choices: []` and a `usage`
 *   object (vLLM's and OpenAI's last chunk before `[DONE]`), which is read and dropped. Events
 *   end with a blank line, LF LF or CR LF CR LF (vLLM writes LF LF).
 * - Engine fields on that usage chunk are not the gateway's to drop: llama-server puts its
 *   `timings` on the stream's last chunk, which is the usage chunk when usage is asked and the
 *   last content chunk (the one with a `finish_reason`) when it is not. So the client gets what
 *   the engine sends when not asked: a content chunk carrying a `finish_reason` is held until
 *   the next event (the usage chunk, `[DONE]`, or the end), and the usage chunk's fields beyond
 *   the OpenAI envelope (`id`, `object`, `created`, `model`, `system_fingerprint`,
 *   `service_tier`, `choices`, `usage`) are spliced into it, its own bytes otherwise untouched.
 *   With no such chunk to carry them, the usage chunk passes without its `usage`.
 */
import { SseFramer } from '../../openai/sse.ts';
import type { ResponseTap } from '../responseTap.ts';

/** A non-streamed answer larger than this is passed on without reading its usage. */
export const MAX_JSON_BYTES = 4 << 20;

const EMPTY = Buffer.alloc(0);
const LF = 0x0a;
const CR = 0x0d;

/** The cached-token count of a usage object, null when it does not say. */
export function cachedTokensOf(usage: unknown): number | null {
  if (typeof usage !== 'object' || usage === null) return null;
  const details = (usage as { prompt_tokens_details?: unknown }).prompt_tokens_details;
  if (typeof details !== 'object' || details === null) return null;
  const cached = (details as { cached_tokens?: unknown }).cached_tokens;
  return typeof cached === 'number' && Number.isFinite(cached) && cached >= 0 ? cached : null;
}

/** An SSE event's data parsed when it is the usage chunk; undefined otherwise. */
function usageChunk(data: string): Record<string, unknown> | undefined {
  if (data === '' || data === '[DONE]' || !data.includes('"usage"')) return undefined;
  try {
    const parsed = JSON.parse(data) as { choices?: unknown; usage?: unknown };
    if (
      Array.isArray(parsed.choices) &&
      parsed.choices.length === 0 &&
      typeof parsed.usage === 'object' &&
      parsed.usage !== null
    ) {
      return parsed as Record<string, unknown>;
    }
  } catch {
    // Not JSON: not a usage chunk.
  }
  return undefined;
}

/** A stream chunk's OpenAI envelope: what the client gets on every chunk, usage aside. */
const ENVELOPE = new Set([
  'id',
  'object',
  'created',
  'model',
  'system_fingerprint',
  'service_tier',
  'choices',
  'usage',
]);

/** The usage chunk's fields beyond the envelope (an engine's own, e.g. llama.cpp's `timings`). */
export function engineFields(chunk: Record<string, unknown>): [string, unknown][] {
  return Object.entries(chunk).filter(
    ([k, v]) => !ENVELOPE.has(k) && v !== null && v !== undefined,
  );
}

/**
 * `fields` spliced into one raw event (`data: {...}` and its blank line) before its object's
 * closing brace, the rest of its bytes untouched; a field it already has is left as it is.
 */
export function withFields(raw: Buffer, fields: readonly [string, unknown][]): Buffer {
  let own: Record<string, unknown> = {};
  try {
    own = JSON.parse(eventData(raw)) as Record<string, unknown>;
  } catch {
    return raw;
  }
  const added = fields.filter(([k]) => !(k in own));
  const close = raw.lastIndexOf(0x7d /* } */);
  if (added.length === 0 || close < 0) return raw;
  const lead = Object.keys(own).length > 0 ? ',' : '';
  const text = added.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`).join(',');
  return Buffer.concat([raw.subarray(0, close), Buffer.from(lead + text), raw.subarray(close)]);
}

const FINISH_KEY = Buffer.from('"finish_reason"');

/** Whether the event in `buf[start, end)` has a choice with a non-null `finish_reason`. */
function hasFinish(buf: Buffer, start: number, end: number): boolean {
  for (let i = buf.indexOf(FINISH_KEY, start); i >= 0 && i < end; ) {
    let j = i + FINISH_KEY.length;
    while (j < end && (buf[j] === 0x20 || buf[j] === 0x3a) /* : */) j++;
    if (j < end && buf[j] !== 0x6e /* n(ull) */) return true;
    i = buf.indexOf(FINISH_KEY, j);
  }
  return false;
}

/** The data of one raw event (its `data:` lines joined with LF). */
function eventData(raw: Buffer): string {
  const lines = raw.toString('utf8').split(/\r\n|\n|\r/);
  const data: string[] = [];
  for (const line of lines) {
    if (!line.startsWith('data:')) continue;
    data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
  }
  return data.join('\n');
}

export class UsageTap implements ResponseTap {
  /** What the response reported cached, null until (or unless) it said. */
  cachedTokens: number | null = null;
  /** The tokens the response reported generating (`usage.completion_tokens`), null until then. */
  completionTokens: number | null = null;
  /** Usage events taken out of the stream (the client did not ask for them). */
  stripped = 0;
  readonly #stream: boolean;
  readonly #strip: boolean;
  #framer: SseFramer | null = null;
  #held: Buffer = EMPTY;
  /** The last content chunk (it has a finish_reason), held for the usage chunk's engine fields. */
  #last: Buffer | null = null;
  #json: Buffer[] | null = [];
  #jsonBytes = 0;
  #sse = false;

  /** `strip`: the gateway asked for usage on its own behalf (streams only). */
  constructor(options: { stream: boolean; strip: boolean }) {
    this.#stream = options.stream;
    this.#strip = options.stream && options.strip;
  }

  /** The response's content type: a stream is tapped as one only when it is one. */
  start(status: number, contentType: string): void {
    this.#sse = contentType.startsWith('text/event-stream');
    if (status >= 400) this.#json = null;
  }

  data(chunk: Buffer): Buffer {
    if (this.#sse) return this.#strip ? this.#passEvents(chunk) : this.#watchEvents(chunk);
    if (!this.#stream && this.#json !== null) {
      this.#jsonBytes += chunk.length;
      if (this.#jsonBytes > MAX_JSON_BYTES) this.#json = null;
      else this.#json.push(chunk);
    }
    return chunk;
  }

  end(): Buffer {
    if (this.#sse) {
      const rest = this.#last ? Buffer.concat([this.#last, this.#held]) : this.#held;
      this.#last = null;
      this.#held = EMPTY;
      return rest;
    }
    if (this.#json !== null && this.#json.length > 0) {
      try {
        const body = JSON.parse(Buffer.concat(this.#json).toString('utf8')) as { usage?: unknown };
        this.#read(body.usage);
      } catch {
        // Not JSON: no usage to read.
      }
      this.#json = null;
    }
    return EMPTY;
  }

  #read(usage: unknown): void {
    this.cachedTokens = cachedTokensOf(usage);
    const completion =
      typeof usage === 'object' && usage !== null
        ? (usage as { completion_tokens?: unknown }).completion_tokens
        : undefined;
    if (typeof completion === 'number' && Number.isFinite(completion) && completion >= 0) {
      this.completionTokens = completion;
    }
  }

  #watchEvents(chunk: Buffer): Buffer {
    try {
      this.#framer ??= new SseFramer();
      for (const data of this.#framer.push(chunk)) {
        const usage = usageChunk(data);
        if (usage !== undefined) this.#read(usage.usage);
      }
    } catch {
      this.#framer = null;
    }
    return chunk;
  }

  #passEvents(chunk: Buffer): Buffer {
    const buf = this.#held.length > 0 ? Buffer.concat([this.#held, chunk]) : chunk;
    // While no event is dropped or held, what passes is one stretch of `buf`: no copy.
    const out: Buffer[] = [];
    let start = 0;
    let passedTo = 0;
    let searchFrom = Math.max(0, this.#held.length - 3);
    /** The next `"usage"` in `buf` at or after `start` (-1: none left), found once per stretch. */
    let usageAt = buf.indexOf(USAGE_KEY);
    for (;;) {
      const end = eventEnd(buf, searchFrom);
      if (end < 0) break;
      if (usageAt >= 0 && usageAt < start) usageAt = buf.indexOf(USAGE_KEY, start);
      // Only an event whose bytes hold `"usage"` can be the usage chunk: the rest pass unread.
      const usage =
        usageAt >= 0 && usageAt + USAGE_KEY.length <= end
          ? usageChunk(eventData(buf.subarray(start, end)))
          : undefined;
      if (usage !== undefined) {
        this.#read(usage.usage);
        this.stripped++;
        if (passedTo < start) out.push(buf.subarray(passedTo, start));
        passedTo = end;
        const fields = engineFields(usage);
        if (this.#last) out.push(withFields(this.#last, fields));
        else if (fields.length > 0) out.push(withoutUsage(usage));
        this.#last = null;
      } else if (hasFinish(buf, start, end)) {
        // The last content chunk, maybe: held until the next event says.
        if (passedTo < start) out.push(buf.subarray(passedTo, start));
        if (this.#last) out.push(this.#last);
        this.#last = Buffer.from(buf.subarray(start, end));
        passedTo = end;
      } else if (this.#last) {
        // passedTo is `start` here: the held chunk goes out just before this event.
        out.push(this.#last);
        this.#last = null;
      }
      start = end;
      searchFrom = end;
    }
    this.#held = start < buf.length ? Buffer.from(buf.subarray(start)) : EMPTY;
    if (passedTo < start) {
      if (out.length === 0) return buf.subarray(passedTo, start);
      out.push(buf.subarray(passedTo, start));
    }
    if (out.length === 0) return EMPTY;
    return out.length === 1 ? out[0]! : Buffer.concat(out);
  }
}

/** The usage chunk as an event without its `usage` (its engine fields had no chunk to ride). */
function withoutUsage(chunk: Record<string, unknown>): Buffer {
  const { usage: _usage, ...rest } = chunk;
  return Buffer.from(`data: ${JSON.stringify(rest)}\n\n`);
}

const USAGE_KEY = Buffer.from('"usage"');

/** The offset just past the first blank line at or after `from` (LF LF or CR LF CR LF), or -1. */
export function eventEnd(buf: Buffer, from: number): number {
  for (let i = buf.indexOf(LF, from); i >= 0; i = buf.indexOf(LF, i + 1)) {
    if (buf[i + 1] === LF) return i + 2;
    if (buf[i - 1] === CR && buf[i + 1] === CR && buf[i + 2] === LF) return i + 3;
  }
  return -1;
}
