/**
 * Brings replicas back: a replica marked down is probed with `GET /health` at growing intervals
 * (exponential backoff, capped) until it answers 200, then reported up. It comes back cold, as an
 * engine that restarted would be; the router forgets its blocks on markUp. A replica that has
 * never answered (an engine still loading when the gateway started) is probed at least once a
 * second, so it takes traffic within a second of coming up; one that answered before backs off
 * further (2 s).
 */
import { Client } from 'undici';
import { isClosedConnection } from './reconnect.ts';

export const HEALTH_BACKOFF_START_MS = 100;
export const HEALTH_BACKOFF_MAX_MS = 2_000;
/** The backoff's cap until a replica's first answer. */
export const HEALTH_BACKOFF_FIRST_MAX_MS = 1_000;
const PROBE_TIMEOUT_MS = 1_000;

/** The wait before the next probe: doubled, capped at 1 s until it ever answered, 2 s after. */
export function nextProbeDelayMs(lastMs: number, everAnswered: boolean): number {
  return Math.min(lastMs * 2, everAnswered ? HEALTH_BACKOFF_MAX_MS : HEALTH_BACKOFF_FIRST_MAX_MS);
}

export interface HealthTarget {
  replica: number;
  url: string;
}

export class HealthChecker {
  readonly #clients = new Map<number, Client>();
  readonly #timers = new Map<number, NodeJS.Timeout>();
  readonly #onUp: (replica: number) => void;
  /** Replicas that answered a probe at least once. */
  readonly #answered = new Set<number>();
  /** Told of every scheduled probe (its delay): tests follow the backoff without a clock. */
  readonly #onSchedule: ((replica: number, delayMs: number) => void) | undefined;
  #closed = false;

  constructor(
    targets: readonly HealthTarget[],
    onUp: (replica: number) => void,
    options: { onSchedule?(replica: number, delayMs: number): void } = {},
  ) {
    this.#onSchedule = options.onSchedule;
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
    this.#onSchedule?.(replica, delayMs);
    const timer = setTimeout(() => {
      this.probe(replica).then((healthy) => {
        if (this.#closed || !this.#timers.has(replica)) return;
        if (healthy) {
          this.#timers.delete(replica);
          this.#onUp(replica);
        } else this.#schedule(replica, nextProbeDelayMs(delayMs, this.#answered.has(replica)));
      });
    }, delayMs);
    timer.unref();
    this.#timers.set(replica, timer);
  }

  /**
   * One `GET /health` (`/v1/models` where it has none): true on a 200 within the probe timeout
   * (1 s). A kept-alive connection the replica closed under the probe is no verdict: the probe is
   * asked again, once.
   */
  async probe(replica: number): Promise<boolean> {
    const client = this.#clients.get(replica);
    if (!client) return false;
    for (let attempt = 0; ; attempt++) {
      try {
        const ok = await this.#ask(client);
        if (ok) this.#answered.add(replica);
        return ok;
      } catch (err) {
        if (attempt > 0 || !isClosedConnection(err)) return false;
      }
    }
  }

  async #ask(client: Client): Promise<boolean> {
    const { statusCode, body } = await client.request({ path: '/health', method: 'GET' });
    await body.dump();
    if (statusCode !== 404) return statusCode === 200;
    // No /health (a plain OpenAI-compatible server): its model list answers for it.
    const models = await client.request({ path: '/v1/models', method: 'GET' });
    await models.body.dump();
    return models.statusCode === 200;
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const timer of this.#timers.values()) clearTimeout(timer);
    this.#timers.clear();
    await Promise.all([...this.#clients.values()].map((c) => c.destroy().catch(() => {})));
  }
}
