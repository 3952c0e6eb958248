/** Block arithmetic shared by the KV policies. */
import type { BlockPool, PrefixMatch } from '../kv/blockPool.ts';
import type { Seq } from './seq.ts';

/** Blocks that hold `tokens` tokens. */
export const blocksFor = (tokens: number, blockSize: number): number =>
  Math.ceil(tokens / blockSize);

/**
 * Pins the cached prefix `hit` and allocates `freshBlocks` more for `seq`; the caller has checked
 * that enough blocks are free (the hit's free blocks count against them too).
 */
export function takeBlocks(pool: BlockPool, seq: Seq, hit: PrefixMatch, freshBlocks: number): void {
  pool.acquire(hit.blockIds);
  // An admitted request holds no blocks yet: one copy beats hundreds of growing pushes.
  if (seq.blockIds.length === 0) seq.blockIds = hit.blockIds.slice();
  else for (const block of hit.blockIds) seq.blockIds.push(block);
  if (!pool.tryAllocate(freshBlocks, seq.blockIds)) {
    throw new Error(`pool had fewer than ${freshBlocks} free blocks after the room check`);
  }
  seq.blockCount = seq.blockIds.length;
}
