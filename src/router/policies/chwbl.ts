/**
 * `chwbl`, KubeAI's PrefixHash strategy: consistent hashing with bounded loads
 * (substratusai/kubeai, internal/loadbalancer/balance_chwbl.go, chwblGetAddr and chwblLoadOK;
 * the defaults from api/k8s/v1/model_types.go, PrefixHash: meanLoadFactor 125 %,
 * replication 256, prefixCharLength 100).
 *
 * The request's prefix is hashed onto a ring of 256 virtual nodes per endpoint; the walk goes
 * clockwise to the first endpoint whose in-flight requests (the balancer's own count, the
 * router's ledger here) pass
 *
 *   total in flight = 0,  or  inFlight(r) + 1 <= (total in flight + 1) / n x 1.25,
 *
 * n the endpoints of the group. When none passes, the first endpoint of the walk (the key's
 * owner) takes it. KubeAI hashes the prompt's first 100 characters, about 25 tokens: here the
 * key of its second block (blocks of 16 tokens), which chains the first 32.
 *
 * KubeAI filters nothing else: no KV usage, no report age (it reads no engine metrics), so this
 * policy sets `ownFilters` and the router offers it every replica that is up.
 */
import type { Pick, PickInput } from '../policy.ts';
import { ConsistentHashPolicy, type ConsistentHashOptions } from './consistentHash.ts';
import { prefixHash } from './hashRing.ts';

export const DEFAULT_CHWBL_LOAD_FACTOR = 1.25;
/** Blocks of prefix hashed: KubeAI's prefixCharLength 100, about 25 tokens, in 16-token blocks. */
export const DEFAULT_CHWBL_PREFIX_BLOCKS = 2;

export interface ChwblOptions extends ConsistentHashOptions {
  loadFactor?: number;
}

export class ChwblPolicy extends ConsistentHashPolicy {
  override readonly name = 'chwbl';
  readonly ownFilters = true;
  readonly loadFactor: number;

  constructor(options: ChwblOptions = {}) {
    super({ ...options, prefixBlocks: options.prefixBlocks ?? DEFAULT_CHWBL_PREFIX_BLOCKS });
    this.loadFactor = options.loadFactor ?? DEFAULT_CHWBL_LOAD_FACTOR;
  }

  override pick(input: PickInput): Pick {
    const { candidates } = input;
    const inFlight = new Map(candidates.map((c) => [c.id, c.inFlight]));
    let total = 0;
    for (const c of candidates) total += c.inFlight;
    const scores = candidates.map((c) => c.inFlight);
    let first = -1;
    const id = this.ring(input).walk(prefixHash(input.request, this.prefixBlocks), (r) => {
      const load = inFlight.get(r);
      if (load === undefined) return false;
      if (first < 0) first = r;
      return chwblLoadOk(load, total, candidates.length, this.loadFactor);
    });
    return { replicaId: id >= 0 ? id : first >= 0 ? first : candidates[0]!.id, scores };
  }
}

/** KubeAI's chwblLoadOK: true at no load in flight, else load + 1 <= (total + 1) / n x factor. */
export function chwblLoadOk(load: number, total: number, n: number, loadFactor: number): boolean {
  if (total === 0) return true;
  return load + 1 <= ((total + 1) / n) * loadFactor;
}
