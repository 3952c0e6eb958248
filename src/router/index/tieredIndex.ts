/**
 * What both prefix indexes hold (approxIndex.ts, eventIndex.ts): each replica's GPU blocks and the
 * blocks of its CPU tier, as two BlockIndexes, and the per-replica reads and clearing over them.
 */
import { BlockIndex } from './blockIndex.ts';

export abstract class TieredIndex {
  readonly blocks: BlockIndex;
  /** Blocks in each replica's CPU tier; empty for a replica without one. */
  readonly cpuBlocks: BlockIndex;

  constructor(replicaCount: number, expectedKeys: number) {
    this.blocks = new BlockIndex(replicaCount, expectedKeys);
    this.cpuBlocks = new BlockIndex(replicaCount);
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
