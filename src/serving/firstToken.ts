/**
 * Watches an OpenAI SSE stream, as it passes through unchanged, for the first chunk that carries
 * generated content: that is when the request's prefill is done and the router's ledger moves its
 * prompt tokens off the queue. Only the bytes up to that point are framed (`src/openai/sse.ts`)
 * and parsed; after it the stream is not looked at again.
 */
import { SseFramer } from '../openai/sse.ts';

export class FirstTokenDetector {
  readonly #framer = new SseFramer();
  #done = false;

  /** True once content was seen (or the stream proved unreadable, which ends the watch too). */
  get done(): boolean {
    return this.#done;
  }

  /** Feeds a chunk; returns true on the chunk that completes the first content event. */
  feed(chunk: Buffer): boolean {
    if (this.#done) return false;
    let found: boolean;
    try {
      // Events after the first with content are neither decoded nor parsed.
      found = this.#framer.pushUntil(chunk, eventHasContent);
    } catch {
      // An event too large to be an OpenAI chunk: this is not a stream worth watching.
      this.#done = true;
      return false;
    }
    if (found) this.#done = true;
    return found;
  }
}

function eventHasContent(data: string): boolean {
  if (data === '' || data === '[DONE]') return false;
  let parsed: { choices?: unknown };
  try {
    parsed = JSON.parse(data);
  } catch {
    return false;
  }
  if (!Array.isArray(parsed?.choices)) return false;
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
