/**
 * The admission part of `kvroute serve`'s config: per-tenant limits and priority classes under
 * `tenants`, named `priority-classes`, the fleet-wide `max-queue-ms` bound and the per-request
 * `max-ttft-ms` bound, with the prefill cost they are measured in. Read from the same YAML document as the rest of the config:
 *
 *   max-queue-ms: 600            # refuse new requests while every replica has more queued
 *   max-ttft-ms: 300             # refuse a request whose modelled TTFT where it was routed is more
 *   prefill-us-per-token: 71.3   # the served model's prefill cost (default: the router's,
 *                                # the seed replica, Llama 3.3 70B on TP=2 H200)
 *   priority-classes: { interactive: -10, batch: 10 }   # vLLM priority, lower first
 *   tenants:
 *     acme:
 *       priority-class: batch
 *       limits: { requests-per-second: 5, burst: 10, concurrent-requests: 8,
 *                 prompt-tokens-per-minute: 500000 }
 */
import type { TenantLimits } from '../admission/tenantLimits.ts';
import { DEFAULT_PREFILL_US_PER_TOKEN as ROUTER_PREFILL_US_PER_TOKEN } from '../router/defaults.ts';
import { configError, int, isRecord, num, str } from './configValues.ts';

export interface AdmissionConfig {
  /** Fleet-wide bound in ms of modelled prefill; null: none. */
  maxQueueMs: number | null;
  /** Bound on a request's modelled TTFT on the replica it was routed to, ms; null: none. */
  maxTtftMs: number | null;
  /** Prefill cost per uncached prompt token of the served model, µs. */
  prefillUsPerToken: number;
  /** Class name -> the `priority` written into a request that did not give one. */
  priorityClasses: Record<string, number>;
  /** Tenant -> its limits (only tenants listed with `limits`). */
  tenantLimits: Record<string, TenantLimits>;
  /** Tenant -> its class's priority (only tenants listed with `priority-class`). */
  tenantPriority: Record<string, number>;
  /** Tenant -> its class's name (the flow-control queue's class; same tenants as above). */
  tenantClass: Record<string, string>;
}

/** The router seed's replica, what `kvroute engine` simulates by default: the router's figure. */
export const DEFAULT_PREFILL_US_PER_TOKEN = ROUTER_PREFILL_US_PER_TOKEN;

export function defaultAdmission(): AdmissionConfig {
  return {
    maxQueueMs: null,
    maxTtftMs: null,
    prefillUsPerToken: DEFAULT_PREFILL_US_PER_TOKEN,
    priorityClasses: {},
    tenantLimits: {},
    tenantPriority: {},
    tenantClass: {},
  };
}

const TENANT_KEYS = ['cache-salt', 'priority-class', 'limits', 'flow-weight'];
const LIMIT_KEYS = [
  'requests-per-second',
  'burst',
  'concurrent-requests',
  'prompt-tokens-per-minute',
];

/** The admission keys of a (validated mapping) config document, onto `base`. */
export function readAdmissionDoc(
  doc: Record<string, unknown>,
  base: AdmissionConfig,
): AdmissionConfig {
  const out = { ...base };
  if (doc['max-queue-ms'] !== undefined) {
    out.maxQueueMs = num(doc['max-queue-ms'], 'max-queue-ms', 1);
  }
  if (doc['max-ttft-ms'] !== undefined) {
    out.maxTtftMs = num(doc['max-ttft-ms'], 'max-ttft-ms', 1);
  }
  if (doc['prefill-us-per-token'] !== undefined) {
    out.prefillUsPerToken = num(doc['prefill-us-per-token'], 'prefill-us-per-token', 1e-6);
  }
  if (doc['priority-classes'] !== undefined) {
    const classes = doc['priority-classes'];
    if (!isRecord(classes)) throw configError('priority-classes', 'must be a mapping NAME: INT');
    out.priorityClasses = {};
    for (const [name, value] of Object.entries(classes)) {
      out.priorityClasses[name] = int(value, `priority-classes.${name}`);
    }
  }
  if (doc.tenants !== undefined && isRecord(doc.tenants)) {
    out.tenantLimits = {};
    out.tenantPriority = {};
    out.tenantClass = {};
    for (const [tenant, spec] of Object.entries(doc.tenants)) {
      if (!isRecord(spec)) continue;
      const key = `tenants.${tenant}`;
      for (const k of Object.keys(spec)) {
        if (!TENANT_KEYS.includes(k)) {
          throw configError(`${key}.${k}`, `is not a known key (${TENANT_KEYS.join(', ')})`);
        }
      }
      if (spec.limits !== undefined) out.tenantLimits[tenant] = limitsFromDoc(spec.limits, key);
      if (spec['priority-class'] !== undefined) {
        const name = str(spec['priority-class'], `${key}.priority-class`);
        const priority = out.priorityClasses[name];
        if (priority === undefined) {
          const known = Object.keys(out.priorityClasses);
          throw configError(
            `${key}.priority-class`,
            `names no class in priority-classes (${known.length > 0 ? known.join(', ') : 'none defined'})`,
          );
        }
        out.tenantPriority[tenant] = priority;
        out.tenantClass[tenant] = name;
      }
    }
  }
  return out;
}

function limitsFromDoc(doc: unknown, tenantKey: string): TenantLimits {
  const key = `${tenantKey}.limits`;
  if (!isRecord(doc)) throw configError(key, `must be a mapping (${LIMIT_KEYS.join(', ')})`);
  for (const k of Object.keys(doc)) {
    if (!LIMIT_KEYS.includes(k)) {
      throw configError(`${key}.${k}`, `is not a known key (${LIMIT_KEYS.join(', ')})`);
    }
  }
  const opt = (name: string, read: (v: unknown, k: string) => number): number | null =>
    doc[name] === undefined ? null : read(doc[name], `${key}.${name}`);
  const limits: TenantLimits = {
    requestsPerS: opt('requests-per-second', (v, k) => num(v, k, 1e-6)),
    burst: opt('burst', (v, k) => num(v, k, 1)),
    concurrent: opt('concurrent-requests', (v, k) => int(v, k, 1)),
    promptTokensPerMin: opt('prompt-tokens-per-minute', (v, k) => int(v, k, 1)),
  };
  if (limits.burst !== null && limits.requestsPerS === null) {
    throw configError(`${key}.burst`, 'needs requests-per-second');
  }
  return limits;
}
