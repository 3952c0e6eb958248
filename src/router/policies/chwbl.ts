/**
 * `chwbl`, KubeAI's consistent hashing with bounded loads: hash a prefix key onto a ring of 256
 * virtual nodes per endpoint and walk clockwise to the first eligible endpoint whose in-flight
 * requests (router ledger) are within the bound
 *
 *   inFlight(r) <= (total in-flight + 1) / n x loadFactor,  loadFactor = 1.25,
 *
 * n and the total taken over the eligible endpoints. Some endpoint always meets the bound (one
 * is at or below the mean); if the walk finds none anyway, the least loaded wins.
 */
import type { Pick, PickInput } from '../policy.ts';
import { ConsistentHashPolicy, type ConsistentHashOptions } from './consistentHash.ts';
import { prefixHash } from './hashRing.ts';
import { argMin } from './pickBest.ts';

export const DEFAULT_CHWBL_LOAD_FACTOR = 1.25;

export interface ChwblOptions extends ConsistentHashOptions {
  loadFactor?: number;
}

export class ChwblPolicy extends ConsistentHashPolicy {
  override readonly name = 'chwbl';
  readonly loadFactor: number;

  constructor(options: ChwblOptions = {}) {
    super(options);
    this.loadFactor = options.loadFactor ?? DEFAULT_CHWBL_LOAD_FACTOR;
  }

  override pick(input: PickInput): Pick {
    const { candidates } = input;
    const inFlight = new Map(candidates.map((c) => [c.id, c.inFlight]));
    let total = 0;
    for (const c of candidates) total += c.inFlight;
    const bound = ((total + 1) / candidates.length) * this.loadFactor;
    const scores = candidates.map((c) => c.inFlight);
    const id = this.ring(input).walk(prefixHash(input.request, this.prefixBlocks), (r) => {
      const load = inFlight.get(r);
      return load !== undefined && load <= bound;
    });
    if (id >= 0) return { replicaId: id, scores };
    return { replicaId: candidates[argMin(scores, input.rng)]!.id, scores };
  }
}
