/**
 * Admission control at the gateway, before routing: the fleet-wide queue bound first (it takes
 * nothing from anyone), then the tenant's limits; after routing, the TTFT bound
 * (`src/admission/ttftBound.ts`) on the replica the router picked. A refusal is a 429 in the
 * project's error shape (vLLM's, with the integer `code`) with OpenAI's `rate_limit_exceeded` as
 * its `type`, the limit that refused it as `param`, and `Retry-After` in whole seconds:
 *
 *   {"error": {"message": "...", "type": "rate_limit_exceeded",
 *              "param": "requests_per_second", "code": 429}}
 *
 * An admitted request may also get its tenant's priority class written into the body as vLLM's
 * `priority` field, only when the client sent none (a client's own priority goes through as is).
 */
import { type QueueView, queueBoundVerdict } from '../admission/queueBound.ts';
import { type LimitName, TenantLimiter } from '../admission/tenantLimits.ts';
import { ttftBoundVerdict } from '../admission/ttftBound.ts';
import { ApiError } from '../openai/errors.ts';
import type { AdmissionConfig } from './admissionConfig.ts';

export const RATE_LIMIT_TYPE = 'rate_limit_exceeded';

export interface Admitted {
  /** Frees the tenant's concurrency slot: call once when the response is over. */
  release(): void;
  /** The body to send upstream: the given one, or with the tenant's priority written in. */
  body: Buffer;
}

export interface AdmissionRequest {
  tenant: string | null;
  promptTokens: number;
  /** The client's own `priority`, null when it sent none. */
  priority: number | null;
  body: Buffer;
  /** The healthy replicas' ledgers of the request's pool (read only when a bound is set). */
  queues(): readonly QueueView[];
}

export class GatewayAdmission {
  readonly #config: AdmissionConfig;
  readonly #limiter: TenantLimiter;
  readonly #onReject: (limit: LimitName, tenant: string | null) => void;

  /** `onReject`: told of every refusal (the metrics count them). */
  constructor(
    config: AdmissionConfig,
    onReject: (limit: LimitName, tenant: string | null) => void = () => {},
  ) {
    this.#config = config;
    this.#limiter = new TenantLimiter(config.tenantLimits);
    this.#onReject = onReject;
  }

  /** Admits `req` or throws a 429 ApiError; `nowMs` is the limits' clock. */
  admit(req: AdmissionRequest, nowMs: number): Admitted {
    const { maxQueueMs, prefillUsPerToken } = this.#config;
    if (maxQueueMs !== null) {
      const verdict = queueBoundVerdict(req.queues(), prefillUsPerToken, maxQueueMs);
      if (!verdict.admitted) {
        throw this.#refuse(
          'max_queue_ms',
          req.tenant,
          verdict.retryAfterMs,
          `the fleet is overloaded: every replica has more than ${maxQueueMs} ms of prefill queued (shortest ${Math.round(verdict.shortestQueueMs)} ms)`,
        );
      }
    }
    const admission = this.#limiter.admit(req.tenant, req.promptTokens, nowMs);
    if (!admission.admitted) {
      throw this.#refuse(admission.limit, req.tenant, admission.retryAfterMs, admission.message);
    }
    const priority = req.tenant === null ? undefined : this.#config.tenantPriority[req.tenant];
    return {
      release: admission.release,
      body:
        priority === undefined || req.priority !== null
          ? req.body
          : withPriority(req.body, priority),
    };
  }

  /**
   * Throws a 429 when the routed request's modelled TTFT on its replica is over the TTFT bound;
   * the caller then ends the route (its ledger entry goes). Nothing without a bound.
   */
  checkRoute(
    decision: { replica: string; queuedAheadTokens: number; uncachedTokens: number },
    tenant: string | null,
  ): void {
    const { maxTtftMs, prefillUsPerToken } = this.#config;
    if (maxTtftMs === null) return;
    const { queuedAheadTokens, uncachedTokens } = decision;
    const verdict = ttftBoundVerdict(
      queuedAheadTokens,
      uncachedTokens,
      prefillUsPerToken,
      maxTtftMs,
    );
    if (verdict.admitted) return;
    throw this.#refuse(
      'max_ttft_ms',
      tenant,
      verdict.retryAfterMs,
      `the fleet is overloaded: this request would wait about ${Math.round(verdict.predictedMs)} ms for its first token on ${decision.replica} (the bound is ${maxTtftMs} ms)`,
    );
  }

  #refuse(
    limit: LimitName,
    tenant: string | null,
    retryAfterMs: number,
    message: string,
  ): ApiError {
    this.#onReject(limit, tenant);
    return new ApiError('ERR_RATE_LIMITED', message, limit, {
      retryAfterS: Math.max(1, Math.ceil(retryAfterMs / 1000)),
      type: RATE_LIMIT_TYPE,
    });
  }
}

/**
 * `body` (a JSON object already parsed once, without a `priority` value) with `"priority": N`
 * inserted as its first member: the client's bytes go through untouched after it.
 */
export function withPriority(body: Buffer, priority: number): Buffer {
  const open = body.indexOf(0x7b);
  const rest = body.subarray(open + 1);
  let first = 0;
  while (first < rest.length && isJsonSpace(rest[first]!)) first++;
  const empty = rest[first] === 0x7d;
  const member = Buffer.from(`"priority":${priority}${empty ? '' : ','}`);
  return Buffer.concat([body.subarray(0, open + 1), member, rest]);
}

const isJsonSpace = (c: number): boolean => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;
