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
 */
import { SseFramer } from '../../openai/sse.ts';
import type { ResponseTap } from '../proxy.ts';

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

/** The usage object of an SSE event's data when it is the usage chunk; undefined otherwise. */
function usageChunk(data: string): unknown {
  if (data === '' || data === '[DONE]' || !data.includes('"usage"')) return undefined;
  try {
    const parsed = JSON.parse(data) as { choices?: unknown; usage?: unknown };
    if (
      Array.isArray(parsed.choices) &&
      parsed.choices.length === 0 &&
      typeof parsed.usage === 'object' &&
      parsed.usage !== null
    ) {
      return parsed.usage;
    }
  } catch {
    // Not JSON: not a usage chunk.
  }
  return undefined;
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
  /** Usage events taken out of the stream (the client did not ask for them). */
  stripped = 0;
  readonly #stream: boolean;
  readonly #strip: boolean;
  #framer: SseFramer | null = null;
  #held: Buffer = EMPTY;
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
      const rest = this.#held;
      this.#held = EMPTY;
      return rest;
    }
    if (this.#json !== null && this.#json.length > 0) {
      try {
        const body = JSON.parse(Buffer.concat(this.#json).toString('utf8')) as { usage?: unknown };
        this.cachedTokens = cachedTokensOf(body.usage);
      } catch {
        // Not JSON: no usage to read.
      }
      this.#json = null;
    }
    return EMPTY;
  }

  #watchEvents(chunk: Buffer): Buffer {
    try {
      this.#framer ??= new SseFramer();
      for (const data of this.#framer.push(chunk)) {
        const usage = usageChunk(data);
        if (usage !== undefined) this.cachedTokens = cachedTokensOf(usage);
      }
    } catch {
      this.#framer = null;
    }
    return chunk;
  }

  #passEvents(chunk: Buffer): Buffer {
    const buf = this.#held.length > 0 ? Buffer.concat([this.#held, chunk]) : chunk;
    // While no event is dropped, what passes is one stretch of `buf`: no copy.
    let out: Buffer[] | null = null;
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
        this.cachedTokens = cachedTokensOf(usage);
        this.stripped++;
        out ??= [];
        if (passedTo < start) out.push(buf.subarray(passedTo, start));
        passedTo = end;
      }
      start = end;
      searchFrom = end;
    }
    this.#held = start < buf.length ? Buffer.from(buf.subarray(start)) : EMPTY;
    if (out === null) return start === 0 ? EMPTY : buf.subarray(0, start);
    if (passedTo < start) out.push(buf.subarray(passedTo, start));
    if (out.length === 0) return EMPTY;
    return out.length === 1 ? out[0]! : Buffer.concat(out);
  }
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
