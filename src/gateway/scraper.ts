/**
 * Polls each backend's Prometheus `/metrics` for the three gauges the router filters and scores
 * on (KV usage, running, waiting) and hands them over as a report stamped with the wall clock.
 * A backend that cannot be scraped sends no report, so the router's staleness filter drops it.
 */
import { Client } from 'undici';
import { type EngineCacheFacts, parseEngineCacheFacts } from './audit/engineFacts.ts';

/** The audit's figures (`audit/engineFacts.ts`) ride along when the page has them. */
export interface EngineReport extends EngineCacheFacts {
  /** Fraction of KV blocks in use, 0..1. */
  kvUsage: number;
  running: number;
  waiting: number;
}

export const KV_USAGE_METRIC = 'vllm:kv_cache_usage_perc';
/** vLLM before v0.10 named the gauge gpu_cache_usage_perc. */
const KV_USAGE_METRIC_OLD = 'vllm:gpu_cache_usage_perc';
export const RUNNING_METRIC = 'vllm:num_requests_running';
export const WAITING_METRIC = 'vllm:num_requests_waiting';

/** Reads the gauges out of Prometheus text: usage is the max over label sets, counts the sum. */
export function parseEngineMetrics(text: string): EngineReport | null {
  let kvUsage: number | null = null;
  let running: number | null = null;
  let waiting: number | null = null;
  for (const line of text.split('\n')) {
    if (line.length === 0 || line.charCodeAt(0) === 35 /* # */) continue;
    const brace = line.indexOf('{');
    const space = line.indexOf(' ');
    const nameEnd = brace >= 0 && brace < space ? brace : space;
    if (nameEnd <= 0) continue;
    const name = line.slice(0, nameEnd);
    if (
      name !== KV_USAGE_METRIC &&
      name !== KV_USAGE_METRIC_OLD &&
      name !== RUNNING_METRIC &&
      name !== WAITING_METRIC
    ) {
      continue;
    }
    const afterLabels = brace >= 0 && brace < space ? line.indexOf('}', brace) + 1 : nameEnd;
    const value = Number(line.slice(afterLabels).trim().split(/\s+/)[0]);
    if (!Number.isFinite(value)) continue;
    if (name === RUNNING_METRIC) running = (running ?? 0) + value;
    else if (name === WAITING_METRIC) waiting = (waiting ?? 0) + value;
    else kvUsage = Math.max(kvUsage ?? 0, value);
  }
  if (kvUsage === null && running === null && waiting === null) return null;
  return { kvUsage: kvUsage ?? 0, running: running ?? 0, waiting: waiting ?? 0 };
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
  /** Reads the page (another engine's names, e.g. engines/sglang/metrics.ts); absent: vLLM's. */
  parse?(text: string): EngineReport | null;
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
      this.#scrape(target.client)
        .then((report) => {
          if (report) this.#options.onReport(target.replica, report, Date.now());
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

  async #scrape(client: Client): Promise<EngineReport | null> {
    const { statusCode, body } = await client.request({ path: '/metrics', method: 'GET' });
    const text = await body.text();
    const parse = this.#options.parse ?? parseEngineMetrics;
    const report = statusCode === 200 ? parse(text) : null;
    return report && { ...report, ...parseEngineCacheFacts(text) };
  }

  async close(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await Promise.all(this.#targets.map((t) => t.client.destroy().catch(() => {})));
  }
}
