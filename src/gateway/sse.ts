/**
 * Watches an OpenAI SSE stream, as it passes through unchanged, for the first chunk that carries
 * generated content: that is when the request's prefill is done and the router's ledger moves its
 * prompt tokens off the queue. Only the bytes up to that point are decoded and parsed; after it
 * the stream is not looked at again.
 */
import { StringDecoder } from 'node:string_decoder';

/** An event this large without a blank line is not SSE from an OpenAI server; stop looking. */
const MAX_PENDING_CHARS = 1 << 20;

export class FirstTokenDetector {
  #decoder = new StringDecoder('utf8');
  #pending = '';
  #done = false;

  /** True once content was seen (or the stream proved unreadable, which ends the watch too). */
  get done(): boolean {
    return this.#done;
  }

  /** Feeds a chunk; returns true on the chunk that completes the first content event. */
  feed(chunk: Buffer): boolean {
    if (this.#done) return false;
    this.#pending += this.#decoder.write(chunk);
    for (;;) {
      const end = eventEnd(this.#pending);
      if (end === null) break;
      const event = this.#pending.slice(0, end.at);
      this.#pending = this.#pending.slice(end.at + end.length);
      if (eventHasContent(event)) {
        this.#done = true;
        this.#pending = '';
        return true;
      }
    }
    if (this.#pending.length > MAX_PENDING_CHARS) {
      this.#done = true;
      this.#pending = '';
    }
    return false;
  }
}

function eventEnd(text: string): { at: number; length: number } | null {
  const lf = text.indexOf('\n\n');
  const crlf = text.indexOf('\r\n\r\n');
  if (lf < 0 && crlf < 0) return null;
  if (crlf >= 0 && (lf < 0 || crlf < lf)) return { at: crlf, length: 4 };
  return { at: lf, length: 2 };
}

function eventHasContent(event: string): boolean {
  let data = '';
  for (const line of event.split(/\r?\n/)) {
    if (line.startsWith('data:')) data += line.slice(line.startsWith('data: ') ? 6 : 5);
  }
  if (data === '' || data === '[DONE]') return false;
  let parsed: { choices?: unknown; error?: unknown };
  try {
    parsed = JSON.parse(data);
  } catch {
    return false;
  }
  if (!Array.isArray(parsed.choices)) return false;
  return parsed.choices.some((c) => choiceHasContent(c));
}

/** Completions carry `text`; chat carries `delta.content` (or reasoning / tool calls). */
function choiceHasContent(choice: unknown): boolean {
  if (typeof choice !== 'object' || choice === null) return false;
  const c = choice as { text?: unknown; delta?: Record<string, unknown>; finish_reason?: unknown };
  if (typeof c.text === 'string' && c.text.length > 0) return true;
  const d = c.delta;
  if (d) {
    if (typeof d.content === 'string' && d.content.length > 0) return true;
    if (typeof d.reasoning_content === 'string' && d.reasoning_content.length > 0) return true;
    if (Array.isArray(d.tool_calls) && d.tool_calls.length > 0) return true;
  }
  // A chunk that finishes the choice means generation ran, even if it decoded to empty text.
  return typeof c.finish_reason === 'string';
}
