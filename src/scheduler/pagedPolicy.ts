/**
 * vLLM's KV policy: blocks are allocated as tokens are scheduled; admission needs room for the
 * first chunk with `watermark` of the pool left free; a running request that finds the pool dry
 * makes the scheduler preempt someone.
 */
import type { BlockPool, PrefixMatch } from '../kv/blockPool.ts';
import { blocksFor, takeBlocks } from './kvBlocks.ts';
import type { KvPolicy } from './kvPolicy.ts';
import type { Seq } from './seq.ts';

export class PagedPolicy implements KvPolicy {
  readonly name = 'paged';
  readonly preempts = true;
  readonly #pool: BlockPool;
  readonly #watermarkBlocks: number;

  constructor(pool: BlockPool, watermark: number) {
    this.#pool = pool;
    this.#watermarkBlocks = Math.floor(watermark * pool.numBlocks);
  }

  neverFitsReason(promptTokens: number, maxNewTokens: number): string | null {
    const pool = this.#pool;
    const blocks = blocksFor(promptTokens + maxNewTokens, pool.blockSize);
    const usable = pool.numBlocks - this.#watermarkBlocks;
    if (blocks <= usable) return null;
    return (
      `request needs ${promptTokens} prompt + ${maxNewTokens} new tokens = ${blocks} blocks of ` +
      `${pool.blockSize} tokens, more than the pool's ${pool.numBlocks} blocks less a ` +
      `watermark of ${this.#watermarkBlocks} (${usable * pool.blockSize} tokens)`
    );
  }

  tryAdmit(seq: Seq, hit: PrefixMatch, chunkTokens: number): boolean {
    const pool = this.#pool;
    const cachedBlocks = hit.blockIds.length;
    const freshBlocks =
      blocksFor(cachedBlocks * pool.blockSize + chunkTokens, pool.blockSize) - cachedBlocks;
    if (pool.freeBlocks - hit.freeBlocks - freshBlocks < this.#watermarkBlocks) return false;
    takeBlocks(pool, seq, hit, freshBlocks);
    return true;
  }

  tryGrow(seq: Seq, tokens: number): boolean {
    const pool = this.#pool;
    const freshBlocks = blocksFor(seq.computedTokens + tokens, pool.blockSize) - seq.blockCount;
    if (freshBlocks <= 0) return true;
    if (!pool.tryAllocate(freshBlocks, seq.blockIds)) return false;
    seq.blockCount = seq.blockIds.length;
    return true;
  }
}
