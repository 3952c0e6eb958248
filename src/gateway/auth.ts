/**
 * Client authentication and tenancy. A tenant is what separates cache entries: its salt is
 * folded into the first block key (vLLM's `cache_salt`), so two tenants sharing a system prompt
 * never share KV unless they are configured with the same salt.
 *
 * With client keys configured, the tenant comes from the key alone (a client cannot pick another
 * tenant's salt with a header); without keys, the optional `x-kvroute-tenant` header names it.
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

export class Authenticator {
  readonly #keys: Map<string, string>;
  readonly #salts: Record<string, string>;

  constructor(keys: readonly ClientKey[], tenantSalts: Record<string, string>) {
    this.#keys = new Map(keys.map((k) => [k.key, k.tenant]));
    this.#salts = tenantSalts;
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
    const given = Buffer.from(candidate);
    let found: string | undefined;
    for (const [key, tenant] of this.#keys) {
      const expected = Buffer.from(key);
      if (expected.length === given.length && timingSafeEqual(expected, given)) found = tenant;
    }
    return found;
  }
}

function bearerToken(header: string | undefined): string | null {
  if (!header) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match ? match[1]! : null;
}
