/**
 * Brings replicas back: a replica marked down is probed with `GET /health` at growing intervals
 * (exponential backoff, capped) until it answers 200, then reported up. It comes back cold, as an
 * engine that restarted would be; the router forgets its blocks on markUp.
 */
import { Client } from 'undici';

export const HEALTH_BACKOFF_START_MS = 100;
export const HEALTH_BACKOFF_MAX_MS = 2_000;
const PROBE_TIMEOUT_MS = 1_000;

export interface HealthTarget {
  replica: number;
  url: string;
}

export class HealthChecker {
  readonly #clients = new Map<number, Client>();
  readonly #timers = new Map<number, NodeJS.Timeout>();
  readonly #onUp: (replica: number) => void;
  #closed = false;

  constructor(targets: readonly HealthTarget[], onUp: (replica: number) => void) {
    for (const t of targets) {
      this.#clients.set(
        t.replica,
        new Client(t.url, { headersTimeout: PROBE_TIMEOUT_MS, bodyTimeout: PROBE_TIMEOUT_MS }),
      );
    }
    this.#onUp = onUp;
  }

  /** Replicas being probed now. */
  get watching(): number[] {
    return [...this.#timers.keys()];
  }

  /** Starts probing `replica` (no-op when already probing). */
  watch(replica: number): void {
    if (this.#closed || this.#timers.has(replica) || !this.#clients.has(replica)) return;
    this.#schedule(replica, HEALTH_BACKOFF_START_MS);
  }

  #schedule(replica: number, delayMs: number): void {
    const timer = setTimeout(() => {
      this.probe(replica).then((healthy) => {
        if (this.#closed || !this.#timers.has(replica)) return;
        if (healthy) {
          this.#timers.delete(replica);
          this.#onUp(replica);
        } else this.#schedule(replica, Math.min(delayMs * 2, HEALTH_BACKOFF_MAX_MS));
      });
    }, delayMs);
    timer.unref();
    this.#timers.set(replica, timer);
  }

  /** One `GET /health` (`/v1/models` where it has none): true on a 200 within the probe timeout (1 s). */
  async probe(replica: number): Promise<boolean> {
    const client = this.#clients.get(replica);
    if (!client) return false;
    try {
      const { statusCode, body } = await client.request({ path: '/health', method: 'GET' });
      await body.dump();
      if (statusCode !== 404) return statusCode === 200;
      // No /health (a plain OpenAI-compatible server): its model list answers for it.
      const models = await client.request({ path: '/v1/models', method: 'GET' });
      await models.body.dump();
      return models.statusCode === 200;
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const timer of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
    await Promise.all([...this.#clients.values()].map((c) => c.destroy().catch(() => {})));
  }
}
