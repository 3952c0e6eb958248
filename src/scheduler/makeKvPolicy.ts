/**
 * The KV policy a name asks for: one registry line per policy file.
 */
import type { BlockPool } from '../kv/blockPool.ts';
import { PagedPolicy } from './pagedPolicy.ts';
import { ReservePolicy } from './reservePolicy.ts';
import type { KvPolicyName } from './types.ts';
import type { KvPolicy, KvPolicyOptions } from './kvPolicy.ts';

const POLICIES: Record<KvPolicyName, (pool: BlockPool, options: KvPolicyOptions) => KvPolicy> = {
  reserve: (pool) => new ReservePolicy(pool),
  paged: (pool, options) => new PagedPolicy(pool, options.watermark),
};

export function makeKvPolicy(
  name: KvPolicyName,
  pool: BlockPool,
  options: KvPolicyOptions,
): KvPolicy {
  return POLICIES[name](pool, options);
}
