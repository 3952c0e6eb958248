/**
 * `consistent-hash`: the block-aligned prompt prefix hashed onto a ring, no load term (the seed's
 * "weak" answer): perfect affinity, and a hot prefix's replica runs away.
 */
import type { Pick, PickInput, Policy } from '../policy.ts';
import {
  DEFAULT_HASH_PREFIX_BLOCKS,
  DEFAULT_VIRTUAL_NODES,
  HashRing,
  prefixHash,
} from './hashRing.ts';

export interface ConsistentHashOptions {
  prefixBlocks?: number;
  virtualNodes?: number;
}

export class ConsistentHashPolicy implements Policy {
  readonly name: string = 'consistent-hash';
  protected readonly prefixBlocks: number;
  protected readonly virtualNodes: number;
  #ring: HashRing | null = null;

  constructor(options: ConsistentHashOptions = {}) {
    this.prefixBlocks = options.prefixBlocks ?? DEFAULT_HASH_PREFIX_BLOCKS;
    this.virtualNodes = options.virtualNodes ?? DEFAULT_VIRTUAL_NODES;
  }

  pick(input: PickInput): Pick {
    const eligible = new Set(input.candidates.map((c) => c.id));
    const id = this.ring(input).walk(prefixHash(input.request, this.prefixBlocks), (r) =>
      eligible.has(r),
    );
    return { replicaId: id >= 0 ? id : input.candidates[0]!.id };
  }

  /** The ring for the current fleet, rebuilt only when the fleet changes. */
  protected ring(input: PickInput): HashRing {
    if (this.#ring?.version !== input.fleetVersion) {
      this.#ring = new HashRing(input.fleet, input.fleetVersion, this.virtualNodes);
    }
    return this.#ring;
  }
}
