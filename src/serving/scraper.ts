/**
 * Polls each backend for the three gauges the router filters and scores on (KV usage, running,
 * waiting), read as its engine's dialect says (`engines/`: vLLM's `/metrics` by default), and
 * hands them over as a report stamped with the wall clock.
 * A backend that cannot be scraped sends no report, so the router's staleness filter drops it.
 */
import { Client } from 'undici';
import type { EngineDialect, EngineShape } from '../engines/dialect.ts';
import { parseVllmLoad, vllm } from '../engines/vllm.ts';
import { type EngineCacheFacts, parseEngineCacheFacts } from './audit/engineFacts.ts';

/** The audit's figures (`audit/engineFacts.ts`) ride along when the page has them. */
export interface EngineReport extends EngineCacheFacts {
  /** Fraction of KV blocks in use, 0..1. */
  kvUsage: number;
  running: number;
  waiting: number;
}

export {
  VLLM_KV_USAGE as KV_USAGE_METRIC,
  VLLM_RUNNING as RUNNING_METRIC,
  VLLM_WAITING as WAITING_METRIC,
} from '../engines/vllm.ts';

/** vLLM's gauges out of Prometheus text (engines/vllm.ts): usage the max over label sets, counts the sum. */
export function parseEngineMetrics(text: string): EngineReport | null {
  return parseVllmLoad(text);
}

export interface ScrapeTarget {
  replica: number;
  url: string;
}

export interface ScraperOptions {
  intervalMs: number;
  /** Which replicas to skip (down ones are the health checker's job). */
  isDown(replica: number): boolean;
  onReport(replica: number, report: EngineReport, nowMs: number): void;
  /** The backend refused the connection: it is gone, not just slow. */
  onUnreachable(replica: number, error: Error): void;
  /** The backend accepted the scrape and did not answer in time: frozen, or only slow. */
  onSilent?(replica: number, error: Error): void;
  /** The backend answered and its pages held no load (or its dialect reads none). */
  onNoReport?(replica: number): void;
  /** Its engine's dialect and shape (absent or null: vLLM's, no slots). */
  engine?(replica: number): { dialect: EngineDialect; shape: EngineShape } | null;
}

/** A scrape that gets no answer by then is a silent backend (the caller probes it). */
const SCRAPE_TIMEOUT_MS = 2_000;

export class MetricsScraper {
  readonly #targets: { replica: number; client: Client; busy: boolean }[];
  readonly #options: ScraperOptions;
  #timer: NodeJS.Timeout | null = null;

  constructor(targets: readonly ScrapeTarget[], options: ScraperOptions) {
    this.#options = options;
    // One connection per backend of its own, so a scrape never waits behind proxied traffic.
    this.#targets = targets.map((t) => ({
      replica: t.replica,
      client: new Client(t.url, {
        headersTimeout: SCRAPE_TIMEOUT_MS,
        bodyTimeout: SCRAPE_TIMEOUT_MS,
      }),
      busy: false,
    }));
  }

  start(): void {
    if (this.#timer) return;
    this.scrapeAll();
    this.#timer = setInterval(() => this.scrapeAll(), this.#options.intervalMs);
    this.#timer.unref();
  }

  /** One round over every backend that is up; a scrape still running is not doubled. */
  scrapeAll(): void {
    for (const target of this.#targets) {
      if (target.busy || this.#options.isDown(target.replica)) continue;
      target.busy = true;
      this.#scrape(target.replica, target.client)
        .then((report) => {
          if (report) this.#options.onReport(target.replica, report, Date.now());
          else this.#options.onNoReport?.(target.replica);
        })
        .catch((err: Error) => {
          const code = (err as { code?: string }).code;
          if (code === 'ECONNREFUSED' || code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') {
            this.#options.onUnreachable(target.replica, err);
          } else if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
            this.#options.onSilent?.(target.replica, err);
          }
        })
        .finally(() => {
          target.busy = false;
        });
    }
  }

  async #scrape(replica: number, client: Client): Promise<EngineReport | null> {
    const engine = this.#options.engine?.(replica) ?? null;
    const dialect = engine?.dialect ?? vllm;
    if (dialect.loadPath === null) return null;
    let metricsText = '';
    const report = await dialect.readLoad(async (path) => {
      const { statusCode, body } = await client.request({ path, method: 'GET' });
      const text = await body.text();
      if (path === '/metrics' && statusCode === 200) metricsText = text;
      return { status: statusCode, text };
    }, engine?.shape ?? { slots: null });
    return report && { ...report, ...parseEngineCacheFacts(metricsText) };
  }

  async close(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await Promise.all(this.#targets.map((t) => t.client.destroy().catch(() => {})));
  }
}
