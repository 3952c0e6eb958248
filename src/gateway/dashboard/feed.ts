/**
 * The dashboard's live feed: a sample every second once someone has looked, the last
 * HISTORY_POINTS points of the series kept, and every open stream sent one JSON state per
 * sample. A new stream gets the history at once, so a chart is full as soon as it opens.
 */
import type { ServerResponse } from 'node:http';
import { type DashboardPoint, type DashboardSample, pointBetween } from './state.ts';

export const SAMPLE_MS = 1000;
/** Five minutes of one-second points. */
export const HISTORY_POINTS = 300;

/** What one SSE message carries. */
export interface DashboardMessage {
  sample: DashboardSample;
  /** The new point; on a stream's first message, every point kept so far. */
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

  /** Serves `res` as an event stream until the client or the feed closes it. */
  subscribe(res: ServerResponse): void {
    if (this.#closed) {
      res.writeHead(503, { 'content-length': 0 });
      res.end();
      return;
    }
    this.#start();
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
    const sample = this.#last ?? this.tick().sample;
    res.write(frame({ sample, points: [...this.#points] }));
    this.#streams.add(res);
    res.once('close', () => this.#streams.delete(res));
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

  #start(): void {
    if (this.#timer !== null) return;
    this.#timer = setInterval(() => this.tick(), SAMPLE_MS);
    this.#timer.unref();
  }
}

const frame = (message: DashboardMessage): string => `data: ${JSON.stringify(message)}\n\n`;
