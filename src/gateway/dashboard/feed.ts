/**
 * The dashboard's live feed: a sample every second from the gateway's start (`start()`), the
 * last HISTORY_POINTS points of the series kept, and every open stream sent one JSON state per
 * sample. A new stream's first message carries every point kept, so a page opened after some
 * traffic draws the last minutes at once, the traffic before it included.
 */
import type { ServerResponse } from 'node:http';
import { type DashboardPoint, type DashboardSample, pointBetween } from './state.ts';

export const SAMPLE_MS = 1000;
/** Five minutes of one-second points. */
export const HISTORY_POINTS = 300;

/** What one SSE message carries. */
export interface DashboardMessage {
  sample: DashboardSample;
  /** The new point; on a stream's first message, every point kept so far (its sample: now). */
  points: DashboardPoint[];
}

export class DashboardFeed {
  readonly #sample: () => DashboardSample;
  readonly #points: DashboardPoint[] = [];
  readonly #streams = new Set<ServerResponse>();
  #last: DashboardSample | null = null;
  #timer: NodeJS.Timeout | null = null;
  #closed = false;

  constructor(sample: () => DashboardSample) {
    this.#sample = sample;
  }

  /** Takes a sample now (the timer does it every SAMPLE_MS once started). */
  tick(): DashboardMessage {
    const sample = this.#sample();
    const point = pointBetween(this.#last, sample);
    this.#last = sample;
    this.#points.push(point);
    if (this.#points.length > HISTORY_POINTS) this.#points.shift();
    const message: DashboardMessage = { sample, points: [point] };
    const data = frame(message);
    for (const res of this.#streams) res.write(data);
    return message;
  }

  /**
   * Samples now and then every SAMPLE_MS until closed, whether or not anyone watches (a sample
   * reads the pools' snapshot and a few counters: cheap). Idempotent; the timer does not keep
   * the process alive.
   */
  start(): void {
    if (this.#timer !== null || this.#closed) return;
    this.tick();
    this.#timer = setInterval(() => this.tick(), SAMPLE_MS);
    this.#timer.unref();
  }

  /** Serves `res` as an event stream until the client or the feed closes it. */
  subscribe(res: ServerResponse): void {
    if (this.#closed) {
      res.writeHead(503, { 'content-length': 0 });
      res.end();
      return;
    }
    this.start();
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
    // The table as it is now; the series as sampled so far (a fresh sample adds no point, so
    // the points stay one a second whoever opens the page).
    if (this.#last === null) this.tick();
    res.write(frame({ sample: this.#sample(), points: [...this.#points] }));
    this.#streams.add(res);
    res.once('close', () => this.#streams.delete(res));
  }

  /** Points kept so far (at most HISTORY_POINTS). */
  get points(): number {
    return this.#points.length;
  }

  get streams(): number {
    return this.#streams.size;
  }

  close(): void {
    this.#closed = true;
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
    for (const res of this.#streams) res.end();
    this.#streams.clear();
  }
}

const frame = (message: DashboardMessage): string => `data: ${JSON.stringify(message)}\n\n`;
