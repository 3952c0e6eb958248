/**
 * The two block indexes a prefix index keeps, GPU (`blocks`) and CPU tier (`cpuBlocks`), and
 * what is done to both alike: making room for replicas, forgetting a replica, counting its
 * blocks. The events index and the approximate index extend it with how they fill them.
 */
import { BlockIndex } from './blockIndex.ts';
import { TierKeys } from './tierKeys.ts';

export class TieredIndex {
  /** Key -> replicas, for the prefix walk. */
  readonly blocks: BlockIndex;
  /** Blocks in each replica's CPU tier (a set per replica: the tier walk asks only "held?"). */
  readonly cpuBlocks: TierKeys;

  constructor(replicaCount: number, expectedKeys = 0) {
    this.blocks = new BlockIndex(replicaCount, expectedKeys);
    this.cpuBlocks = new TierKeys(replicaCount);
  }

  ensureReplicas(count: number): void {
    this.blocks.ensureReplicas(count);
    this.cpuBlocks.ensureReplicas(count);
  }

  clearReplica(replica: number): void {
    this.blocks.clearReplica(replica);
    this.cpuBlocks.clearReplica(replica);
  }

  blockCount(replica: number): number {
    return this.blocks.blockCount(replica);
  }

  cpuBlockCount(replica: number): number {
    return this.cpuBlocks.blockCount(replica);
  }
}
