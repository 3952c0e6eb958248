/**
 * Per-tenant admission limits, on an injected clock: requests per second (a token bucket with a
 * burst), concurrent requests, and prompt tokens per minute (a token bucket holding one minute's
 * allowance and refilling continuously). A request is admitted only when every limit of its
 * tenant allows it, and then it takes from all of them; a refusal takes from none. Tenants
 * without limits (and requests without a tenant) are always admitted.
 */
import { TokenBucket } from './tokenBucket.ts';

export interface TenantLimits {
  /** Sustained requests per second; null: unlimited. */
  requestsPerS: number | null;
  /** Requests that may arrive at once above the rate (default: max(1, requestsPerS)). */
  burst: number | null;
  /** Requests in flight at once; null: unlimited. */
  concurrent: number | null;
  /** Prompt tokens per minute; null: unlimited. */
  promptTokensPerMin: number | null;
}

/** Which limit refused a request; also the `param` of the 429 body. */
export type LimitName =
  | 'requests_per_second'
  | 'concurrent_requests'
  | 'prompt_tokens_per_minute'
  | 'max_queue_ms'
  | 'max_ttft_ms';

export type TenantAdmission =
  | {
      admitted: true /** Call once when the request ends, whatever its outcome. */;
      release(): void;
    }
  | { admitted: false; limit: LimitName; retryAfterMs: number; message: string };

/** When a concurrency slot frees is unknown: a client is told to come back after this. */
export const CONCURRENCY_RETRY_MS = 1000;

const NOTHING_TO_RELEASE = (): void => {};

class TenantState {
  readonly requests: TokenBucket | null;
  readonly promptTokens: TokenBucket | null;
  inFlight = 0;

  constructor(
    readonly limits: TenantLimits,
    nowMs: number,
  ) {
    this.requests =
      limits.requestsPerS === null
        ? null
        : new TokenBucket(
            limits.requestsPerS,
            limits.burst ?? Math.max(1, limits.requestsPerS),
            nowMs,
          );
    this.promptTokens =
      limits.promptTokensPerMin === null
        ? null
        : new TokenBucket(limits.promptTokensPerMin / 60, limits.promptTokensPerMin, nowMs);
  }
}

export class TenantLimiter {
  readonly #limits: ReadonlyMap<string, TenantLimits>;
  readonly #states = new Map<string, TenantState>();

  constructor(limits: Readonly<Record<string, TenantLimits>>) {
    this.#limits = new Map(Object.entries(limits));
  }

  /** Whether any tenant has a limit (the gateway skips the limiter otherwise). */
  get empty(): boolean {
    return this.#limits.size === 0;
  }

  admit(tenant: string | null, promptTokens: number, nowMs: number): TenantAdmission {
    if (tenant === null) return { admitted: true, release: NOTHING_TO_RELEASE };
    const state = this.#state(tenant, nowMs);
    if (state === null) return { admitted: true, release: NOTHING_TO_RELEASE };
    const { limits } = state;
    if (limits.concurrent !== null && state.inFlight >= limits.concurrent) {
      return refuse(
        'concurrent_requests',
        CONCURRENCY_RETRY_MS,
        `tenant '${tenant}' has ${state.inFlight} requests in flight, its limit is ${limits.concurrent}`,
      );
    }
    const requestWaitMs = state.requests?.waitMs(1, nowMs) ?? 0;
    if (requestWaitMs > 0) {
      return refuse(
        'requests_per_second',
        requestWaitMs,
        `tenant '${tenant}' is over its limit of ${limits.requestsPerS} requests per second`,
      );
    }
    const tokenWaitMs = state.promptTokens?.waitMs(promptTokens, nowMs) ?? 0;
    if (tokenWaitMs > 0) {
      return refuse(
        'prompt_tokens_per_minute',
        tokenWaitMs,
        `tenant '${tenant}' is over its limit of ${limits.promptTokensPerMin} prompt tokens per minute (this request has ${promptTokens})`,
      );
    }
    state.requests?.take(1, nowMs);
    state.promptTokens?.take(promptTokens, nowMs);
    state.inFlight++;
    let released = false;
    return {
      admitted: true,
      release: () => {
        if (released) return;
        released = true;
        state.inFlight--;
      },
    };
  }

  /** Requests in flight for `tenant` (counted only for tenants with limits). */
  inFlight(tenant: string): number {
    return this.#states.get(tenant)?.inFlight ?? 0;
  }

  #state(tenant: string, nowMs: number): TenantState | null {
    let state = this.#states.get(tenant);
    if (state === undefined) {
      const limits = this.#limits.get(tenant);
      if (limits === undefined) return null;
      state = new TenantState(limits, nowMs);
      this.#states.set(tenant, state);
    }
    return state;
  }
}

function refuse(limit: LimitName, retryAfterMs: number, message: string): TenantAdmission {
  return { admitted: false, limit, retryAfterMs, message };
}
