/**
 * An event stream's writes with backpressure. Once the socket's buffer is full (`write` returned
 * false), later chunks wait here, joined into one write for the next 'drain'. A client that does
 * not drain cannot hold the engine's memory or KV: when more than `limitBytes` wait, or no drain
 * comes for `stallMs`, the stream is given up: `onGiveUp` aborts the request (the core frees its
 * KV blocks at once) and the socket is destroyed. Aborting rather than pausing the request keeps
 * the scheduler out of it (a paused sequence would still hold its blocks), and a reader that is
 * merely slow, but drains, keeps its stream: it only ever has `limitBytes` waiting.
 */
import type { ServerResponse } from 'node:http';

export interface StreamLimits {
  /** Bytes that may wait for a drain before the stream is given up. */
  limitBytes: number;
  /** How long a full socket may stay undrained before the stream is given up. */
  stallMs: number;
}

/** About 4,000 tokens of stream chunks; and a reader that reads nothing for 30 s is gone. */
export const DEFAULT_STREAM_LIMITS: StreamLimits = { limitBytes: 1024 * 1024, stallMs: 30_000 };

export class StreamWriter {
  readonly #res: ServerResponse;
  readonly #limits: StreamLimits;
  readonly #onGiveUp: (reason: string) => void;
  #pending: string[] = [];
  #pendingBytes = 0;
  #waiting = false;
  #ending = false;
  #gaveUp = false;
  #stallTimer: NodeJS.Timeout | null = null;

  constructor(res: ServerResponse, limits: StreamLimits, onGiveUp: (reason: string) => void) {
    this.#res = res;
    this.#limits = limits;
    this.#onGiveUp = onGiveUp;
  }

  write(text: string): void {
    if (this.#gaveUp || this.#ending) return;
    if (!this.#waiting) {
      if (!this.#res.write(text)) this.#wait();
      return;
    }
    this.#pending.push(text);
    // Stream chunks are JSON with escaped non-ASCII: one byte per character.
    this.#pendingBytes += text.length;
    if (this.#pendingBytes > this.#limits.limitBytes) {
      this.#giveUp(`more than ${this.#limits.limitBytes} bytes waited for the client to read`);
    }
  }

  end(text: string): void {
    if (this.#gaveUp || this.#ending) return;
    this.#ending = true;
    if (this.#waiting) this.#pending.push(text);
    else this.#res.end(text);
  }

  #wait(): void {
    this.#waiting = true;
    this.#res.once('drain', this.#flush);
    this.#stallTimer = setTimeout(
      () => this.#giveUp(`the client read nothing for ${this.#limits.stallMs} ms`),
      this.#limits.stallMs,
    );
    this.#stallTimer.unref();
  }

  readonly #flush = (): void => {
    if (this.#stallTimer) clearTimeout(this.#stallTimer);
    this.#stallTimer = null;
    this.#waiting = false;
    const chunk = this.#pending.join('');
    this.#pending = [];
    this.#pendingBytes = 0;
    if (this.#ending) this.#res.end(chunk);
    else if (chunk.length > 0 && !this.#res.write(chunk)) this.#wait();
  };

  #giveUp(reason: string): void {
    this.#gaveUp = true;
    if (this.#stallTimer) clearTimeout(this.#stallTimer);
    this.#res.off('drain', this.#flush);
    this.#pending = [];
    this.#pendingBytes = 0;
    this.#onGiveUp(reason);
    this.#res.destroy();
  }
}
