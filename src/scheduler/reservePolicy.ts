/**
 * The seed's KV policy: at admission reserve every block the request will ever need (prompt +
 * max new tokens), so a running request never runs dry and nothing is preempted. With a prefix
 * cache the cached blocks are pinned and only the rest is reserved.
 */
import type { BlockPool, PrefixMatch } from '../kv/blockPool.ts';
import { blocksFor, takeBlocks } from './kvBlocks.ts';
import type { KvPolicy } from './kvPolicy.ts';
import type { Seq } from './seq.ts';

export class ReservePolicy implements KvPolicy {
  readonly name = 'reserve';
  readonly preempts = false;
  readonly #pool: BlockPool;

  constructor(pool: BlockPool) {
    this.#pool = pool;
  }

  neverFitsReason(promptTokens: number, maxNewTokens: number): string | null {
    const pool = this.#pool;
    const blocks = blocksFor(promptTokens + maxNewTokens, pool.blockSize);
    if (blocks <= pool.numBlocks) return null;
    return (
      `request needs ${promptTokens} prompt + ${maxNewTokens} new tokens = ${blocks} blocks of ` +
      `${pool.blockSize} tokens, more than the pool's ${pool.numBlocks} blocks ` +
      `(${pool.numBlocks * pool.blockSize} tokens)`
    );
  }

  tryAdmit(seq: Seq, hit: PrefixMatch): boolean {
    const pool = this.#pool;
    const freshBlocks =
      blocksFor(seq.promptTokens + seq.maxNewTokens, pool.blockSize) - hit.blockIds.length;
    if (freshBlocks + hit.freeBlocks > pool.freeBlocks) return false;
    takeBlocks(pool, seq, hit, freshBlocks);
    return true;
  }

  tryGrow(): boolean {
    return true; // everything was reserved at admission
  }
}
