/**
 * Client authentication and tenancy. A tenant is what separates cache entries: its salt is
 * folded into the first block key (vLLM's `cache_salt`), so two tenants sharing a system prompt
 * never share KV unless they are configured with the same salt.
 *
 * With client keys configured, the tenant comes from the key alone (a client cannot pick another
 * tenant's salt with a header); without keys, the optional `x-kvroute-tenant` header names it.
 *
 * Some paths are not for tenants: `/router/replicas` and `GET /router/backends` (every replica's
 * internal state) need the admin key whenever keys of any kind are configured; changing the
 * backends (`POST`, `DELETE /router/backends`) needs the admin key always, and is off without
 * one; `/metrics` needs the metrics key (or the admin key) once one is given, and the admin key
 * once client keys exist without one (its tenant labels are not for tenants); it is open
 * otherwise, as Prometheus scrapes it.
 */
import { timingSafeEqual } from 'node:crypto';
import { ApiError } from '../openai/errors.ts';
import type { ClientKey } from './config.ts';

export const TENANT_HEADER = 'x-kvroute-tenant';

export interface Caller {
  tenant: string | null;
  /** Salt for this caller's prompts, or null when it has no tenant. */
  tenantSalt: string | null;
}

const ANONYMOUS: Caller = { tenant: null, tenantSalt: null };

export interface OperatorKeys {
  /** Reads the router's internal state; null: none (closed once client keys exist). */
  adminKey: string | null;
  /** Reads /metrics; null: /metrics is open. */
  metricsKey: string | null;
}

export class Authenticator {
  readonly #keys: Map<string, string>;
  readonly #salts: Record<string, string>;
  readonly #operator: OperatorKeys;

  constructor(
    keys: readonly ClientKey[],
    tenantSalts: Record<string, string>,
    operator: OperatorKeys = { adminKey: null, metricsKey: null },
  ) {
    this.#keys = new Map(keys.map((k) => [k.key, k.tenant]));
    this.#salts = tenantSalts;
    this.#operator = operator;
  }

  /** Throws unless the request may read `/router/replicas`: 401 without a key, 403 with a tenant's. */
  authorizeAdmin(authorization: string | undefined): void {
    const { adminKey } = this.#operator;
    if (adminKey === null && this.#keys.size === 0) return;
    this.#authorizeOperator(authorization, [adminKey], 'an admin key (--admin-key)');
  }

  /** Throws unless the request may change the backends: only with the admin key, never open. */
  authorizeAdminWrite(authorization: string | undefined): void {
    if (this.#operator.adminKey === null) {
      throw new ApiError(
        'ERR_FORBIDDEN',
        'changing backends at run time needs an admin key: start the gateway with --admin-key',
      );
    }
    this.#authorizeOperator(authorization, [this.#operator.adminKey], 'an admin key (--admin-key)');
  }

  /**
   * Throws unless the request may read `/metrics`: open only while neither a metrics key nor a
   * client key is set (its labels name tenants, which one tenant must not learn of another).
   */
  authorizeMetrics(authorization: string | undefined): void {
    const { adminKey, metricsKey } = this.#operator;
    if (metricsKey === null && this.#keys.size === 0) return;
    this.#authorizeOperator(
      authorization,
      [metricsKey, adminKey],
      metricsKey === null
        ? 'an admin key (--admin-key) or a metrics key (--metrics-key)'
        : 'the metrics key',
    );
  }

  #authorizeOperator(
    authorization: string | undefined,
    accepted: readonly (string | null)[],
    what: string,
  ): void {
    const key = bearerToken(authorization);
    if (key === null) throw new ApiError('ERR_UNAUTHORIZED', `this path needs ${what}`);
    let ok = false;
    for (const k of accepted) if (k !== null && sameKey(k, key)) ok = true;
    if (ok) return;
    if (this.#lookup(key) !== undefined) {
      throw new ApiError('ERR_FORBIDDEN', `a client key cannot read this path; it needs ${what}`);
    }
    throw new ApiError('ERR_UNAUTHORIZED', 'invalid API key');
  }

  get required(): boolean {
    return this.#keys.size > 0;
  }

  /** The caller behind a request's headers; throws ERR_UNAUTHORIZED when a key is required. */
  authenticate(authorization: string | undefined, tenantHeader: string | undefined): Caller {
    if (this.#keys.size === 0) {
      if (!tenantHeader) return ANONYMOUS;
      return { tenant: tenantHeader, tenantSalt: this.saltOf(tenantHeader) };
    }
    const key = bearerToken(authorization);
    if (key === null) {
      throw new ApiError('ERR_UNAUTHORIZED', 'missing API key: send Authorization: Bearer KEY');
    }
    const tenant = this.#lookup(key);
    if (tenant === undefined) throw new ApiError('ERR_UNAUTHORIZED', 'invalid API key');
    return { tenant, tenantSalt: this.saltOf(tenant) };
  }

  saltOf(tenant: string): string {
    return this.#salts[tenant] ?? `tenant:${tenant}`;
  }

  /** Compares against every key in constant time per key, so timing does not reveal a prefix. */
  #lookup(candidate: string): string | undefined {
    let found: string | undefined;
    for (const [key, tenant] of this.#keys) if (sameKey(key, candidate)) found = tenant;
    return found;
  }
}

/** Equal keys, compared in constant time for a given length. */
function sameKey(expected: string, given: string): boolean {
  const a = Buffer.from(expected);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}

function bearerToken(header: string | undefined): string | null {
  if (!header) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1]! : null;
}
