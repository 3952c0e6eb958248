/**
 * What keeps the gateway's view of one backend current: its health checker (brings it back when
 * down), its metrics scraper (load reports) and, in events mode, its KV event subscriber. One
 * watch per backend, so a backend joins or leaves at run time without touching the others; the
 * pool it belongs to decides what each signal means (`pool.ts`).
 */
import type { EngineDialect, EngineShape } from '../engines/dialect.ts';
import { SglangEventFeed } from '../engines/sglang/feed.ts';
import type { ForeignKvEvent } from '../router/index.ts';
import type { Backend } from './backends.ts';
import type { CentralEvents } from './centralEvents.ts';
import { HealthChecker } from './health.ts';
import { type EngineReport, MetricsScraper } from './scraper.ts';
import { EventSubscriber, type SubscriberStats } from './subscriber.ts';

/** The watchers' one target id: each watch has a single backend. */
const ONLY = 0;

export interface WatchHooks {
  /** Down backends are not scraped (their health probes bring them back). */
  isDown(): boolean;
  /** A health probe answered after the backend was marked down. */
  onUp(): void;
  onReport(report: EngineReport, nowMs: number): void;
  /** A scrape answered with no load in it (or its engine reports none). */
  onNoReport?(): void;
  /** Its engine's dialect and shape, once known (null: vLLM's). */
  engine?(): { dialect: EngineDialect; shape: EngineShape } | null;
  /** A scrape was refused or reset: the backend is gone, not just slow. */
  onUnreachable(error: Error): void;
  /** A scrape got no answer in time: frozen, or only slow (probe it). */
  onSilent(): void;
  onEvents(events: ForeignKvEvent[], nowMs: number): void;
  /** Its event sequence went back: the engine restarted, its cache is gone. */
  onRestart(): void;
  onDecodeError(error: Error): void;
  /** Its publisher restarts too often to be believed; its events are ignored until it behaves. */
  onBroken(restartsInWindow: number): void;
  onTrusted(): void;
}

export interface WatchOptions {
  scrapeMs: number;
  /** Subscribe to its KV events (events mode, and the backend has an endpoint). */
  events: boolean;
  /**
   * The gateway's bound KV event socket (`--kv-events-bind`): a backend without an `events`
   * endpoint of its own gets the batches whose topic names it from there.
   */
  central?: CentralEvents | null;
  /** The router's tokens per block: an SGLang backend's pages are re-cut into these. */
  blockSize?: number;
}

/** The router's block size where the caller names none (serving/config.ts's default). */
const BLOCK_SIZE = 16;

export class BackendWatch {
  readonly #health: HealthChecker;
  readonly #scraper: MetricsScraper;
  readonly #subscriber: EventSubscriber | null;
  readonly #central: CentralEvents | null;
  #unregister: (() => void) | null = null;
  readonly #url: string;
  readonly #topic: string | null;
  #started = false;
  #closed: Promise<void> | null = null;

  constructor(backend: Backend, options: WatchOptions, hooks: WatchHooks) {
    const target = { replica: ONLY, url: backend.config.url };
    this.#url = backend.config.url;
    this.#topic = backend.config.topic ?? null;
    this.#health = new HealthChecker([target], () => hooks.onUp());
    this.#scraper = new MetricsScraper([target], {
      intervalMs: options.scrapeMs,
      isDown: () => hooks.isDown(),
      onReport: (_r, report, nowMs) => hooks.onReport(report, nowMs),
      onUnreachable: (_r, err) => hooks.onUnreachable(err),
      onSilent: () => hooks.onSilent(),
      onNoReport: () => hooks.onNoReport?.(),
      engine: () => hooks.engine?.() ?? null,
    });
    const { events, replay } = backend.config;
    const decoder =
      backend.config.engine === 'sglang'
        ? { decoder: new SglangEventFeed(options.blockSize ?? BLOCK_SIZE) }
        : {};
    this.#central = options.events && !events ? (options.central ?? null) : null;
    this.#subscriber =
      options.events && (events || this.#central)
        ? new EventSubscriber([{ replica: ONLY, events: events ?? null, replay, ...decoder }], {
            onEvents: (_r, batch, nowMs) => hooks.onEvents(batch, nowMs),
            onRestart: () => hooks.onRestart(),
            onDecodeError: (_r, err) => hooks.onDecodeError(err),
            onBroken: (_r, n) => hooks.onBroken(n),
            onTrusted: () => hooks.onTrusted(),
          })
        : null;
  }

  /** Where its KV events come from: its own endpoint, the bound socket, or nowhere. */
  get eventsSource(): 'own' | 'central' | null {
    if (!this.#subscriber) return null;
    return this.#central ? 'central' : 'own';
  }

  /** Starts scraping and subscribing (once). */
  start(): void {
    if (this.#started || this.#closed) return;
    this.#started = true;
    this.#scraper.start();
    this.#subscriber?.start();
    const subscriber = this.#subscriber;
    if (this.#central && subscriber) {
      this.#unregister = this.#central.register(
        { url: this.#url, topic: this.#topic },
        (seq, payload) => subscriber.push(ONLY, seq, payload),
      );
    }
  }

  /** Probes `/health` with backoff until it answers, then calls `onUp`. */
  watchHealth(): void {
    this.#health.watch(ONLY);
  }

  /** Whether its health is being probed now (it is down). */
  get probing(): boolean {
    return this.#health.watching.length > 0;
  }

  /** One `/health` probe: true on a 200 in time. */
  probe(): Promise<boolean> {
    return this.#health.probe(ONLY);
  }

  /** Relearn the backend's cache from its replay buffer (it came back, or just joined). */
  rebuild(): Promise<void> {
    return this.#subscriber?.rebuild(ONLY) ?? Promise.resolve();
  }

  stats(): SubscriberStats | null {
    return this.#subscriber?.stats(ONLY) ?? null;
  }

  close(): Promise<void> {
    this.#unregister?.();
    this.#closed ??= Promise.allSettled([
      this.#scraper.close(),
      this.#health.close(),
      this.#subscriber?.close(),
    ]).then(() => {});
    return this.#closed;
  }
}
