/**
 * Server-sent events, read and written. `SseFramer` turns a byte stream, cut into chunks
 * anywhere, into the data of each event, by the rules of the WHATWG event-stream format: lines
 * end in LF, CRLF or CR; `data:` lines (one optional space after the colon) are joined with LF;
 * a blank line ends the event; comments (`:`) and other fields (`event`, `id`, `retry`) are
 * skipped, since OpenAI streams carry everything in `data`. It splits lines on bytes (a UTF-8
 * character never contains CR or LF bytes), so a character split across two chunks is decoded
 * whole. The gateway's first-token watcher and the load generator's client both read with it.
 */

/** OpenAI streams end with this event; its data is `[DONE]`. */
export const SSE_DONE = 'data: [DONE]\n\n';

/** One event carrying `json`, as OpenAI servers write them. */
export function sseData(json: unknown): string {
  return `data: ${JSON.stringify(json)}\n\n`;
}

/** An event that grew past the limit without ending: the stream is not an OpenAI event stream. */
export class SseError extends Error {
  readonly code = 'ERR_SSE_EVENT_TOO_LARGE';
}

const LF = 0x0a;
const CR = 0x0d;
const COLON = 0x3a;
const SPACE = 0x20;
const BOM = Buffer.from([0xef, 0xbb, 0xbf]);
const EMPTY = Buffer.alloc(0);
/** Default bound on one event's bytes (its lines so far plus the line being read). */
const MAX_EVENT_BYTES = 1 << 20;

export class SseFramer {
  readonly #maxEventBytes: number;
  /** Bytes of a line whose end has not arrived. */
  #partial: Buffer = EMPTY;
  /** Data lines of the event being read. */
  #data: string[] = [];
  #eventBytes = 0;
  /** The last chunk ended in CR: a LF starting the next one belongs to that line end. */
  #skipLf = false;
  #started = false;
  /** `pushUntil` found what it was asked for. */
  #stopped = false;

  constructor(options: { maxEventBytes?: number } = {}) {
    this.#maxEventBytes = options.maxEventBytes ?? MAX_EVENT_BYTES;
  }

  /** Feeds bytes; returns the data of each event they complete, in order. Throws SseError. */
  push(chunk: Uint8Array): string[] {
    const events: string[] = [];
    this.#frame(chunk, (data) => {
      events.push(data);
      return false;
    });
    return events;
  }

  /**
   * Feeds bytes up to the first event whose data `wanted` accepts, and returns true there; the
   * rest of the chunk is not read (nor its events decoded), and the framer is done: pushing to
   * it again throws. Returns false when no event of the chunk was wanted. Throws SseError.
   */
  pushUntil(chunk: Uint8Array, wanted: (data: string) => boolean): boolean {
    return this.#frame(chunk, wanted);
  }

  /** Frames `chunk`, handing each completed event's data to `sink` until it returns true. */
  #frame(chunk: Uint8Array, sink: (data: string) => boolean): boolean {
    if (this.#stopped) throw new Error('this SSE framer stopped at the event it was asked for');
    let buf = Buffer.isBuffer(chunk)
      ? chunk
      : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    // The held bytes hold no line end (they would have ended a line): search only what is new.
    const held = this.#partial.length;
    if (held > 0) buf = Buffer.concat([this.#partial, buf]);
    let pos = 0;
    if (this.#skipLf && buf.length > 0) {
      this.#skipLf = false;
      if (buf[0] === LF) pos = 1;
    }
    // The next CR and LF at or after pos, each searched again only once pos has passed it.
    let cr = buf.indexOf(CR, held);
    let lf = buf.indexOf(LF, held);
    while (pos < buf.length) {
      if (cr >= 0 && cr < pos) cr = buf.indexOf(CR, pos);
      if (lf >= 0 && lf < pos) lf = buf.indexOf(LF, pos);
      if (lf < 0 && cr < 0) break;
      let end: number;
      let next: number;
      if (cr >= 0 && (lf < 0 || cr < lf)) {
        end = cr;
        if (cr + 1 === buf.length) {
          this.#skipLf = true;
          next = cr + 1;
        } else next = buf[cr + 1] === LF ? cr + 2 : cr + 1;
      } else {
        end = lf;
        next = lf + 1;
      }
      const data = this.#line(buf, pos, end);
      pos = next;
      if (data !== null && sink(data)) {
        this.#stopped = true;
        this.#partial = EMPTY;
        return true;
      }
    }
    this.#partial = pos < buf.length ? Buffer.from(buf.subarray(pos)) : EMPTY;
    if (this.#eventBytes + this.#partial.length > this.#maxEventBytes) {
      throw new SseError(`an event grew past ${this.#maxEventBytes} bytes without ending`);
    }
    return false;
  }

  /** Handles one line; returns the event's data when the line ends an event that has some. */
  #line(buf: Buffer, start: number, end: number): string | null {
    if (!this.#started) {
      this.#started = true;
      // A byte order mark may open the stream.
      if (end - start >= BOM.length && buf.compare(BOM, 0, 3, start, start + 3) === 0) start += 3;
    }
    if (end === start) {
      const data = this.#data.length > 0 ? this.#data.join('\n') : null;
      this.#data = [];
      this.#eventBytes = 0;
      return data;
    }
    this.#eventBytes += end - start + 1;
    // Only `data` fields matter: `data:VALUE`, `data: VALUE`, or a bare `data` (empty value).
    if (
      end - start < 4 ||
      buf[start] !== 0x64 ||
      buf[start + 1] !== 0x61 ||
      buf[start + 2] !== 0x74 ||
      buf[start + 3] !== 0x61
    ) {
      return null;
    }
    let from = start + 4;
    if (from < end && buf[from] !== COLON) return null; // a field named data-something
    if (from < end) from++;
    if (from < end && buf[from] === SPACE) from++;
    this.#data.push(buf.toString('utf8', from, end));
    return null;
  }
}
