/**
 * A replica's cached prefix through its CPU tier. The GPU walk (prefixMatch.ts) stops at the
 * first block a replica lacks on the GPU; a block its CPU tier holds is still a hit, reloaded
 * over PCIe instead of recomputed, so the prefix goes on while each block is in either tier.
 * Walked for the replicas that have CPU blocks at all (none: nothing to do), all at once: each
 * block's GPU entry is looked up once and its bits read for every replica still walking, where a
 * walk per replica looked every block up once per replica; the CPU tier is asked per replica
 * (a set of (replica, key) pairs, tierKeys.ts), only where the GPU lacks the block.
 */
import type { BlockKey } from '../../kv/blockKey.ts';
import type { BlockIndex } from './blockIndex.ts';
import type { TierKeys } from './tierKeys.ts';

/** A block not looked up yet (`locate` gives an index >= 0 or -1). */
const UNKNOWN = -2;
/**
 * Blocks warmed ahead of a walk at a time: once a replica's walk has gone past its first block
 * (most end there), the GPU slots of the next blocks and their slots in its CPU set are loaded
 * together, so their cache misses overlap instead of coming one block at a time.
 */
const WARM_AHEAD = 8;
/** The replicas still walking, reused across calls (grown as fleets grow). */
let walking = new Int32Array(64);

/**
 * For each replica id in `ids`, extends `matched[r]` (blocks, from the GPU walk) through the
 * blocks either index holds and writes into `cpuBlocks[r]` how many of the matched blocks only
 * the CPU tier holds.
 */
export function extendThroughTier(
  gpu: BlockIndex,
  cpu: TierKeys,
  keys: readonly BlockKey[],
  ids: readonly number[],
  matched: Int32Array,
  cpuBlocks: Int32Array,
): void {
  if (walking.length < ids.length) walking = new Int32Array(2 * ids.length);
  let count = 0;
  let from = keys.length;
  for (const r of ids) {
    cpuBlocks[r] = 0;
    if (cpu.blockCount(r) === 0 || matched[r]! >= keys.length) continue;
    walking[count++] = r;
    if (matched[r]! < from) from = matched[r]!;
  }
  const gpuArena = gpu.arena;
  const gpuKeys = gpuArena.keys;
  // The GPU entry of the block last looked up, and that block: a chain's blocks sit in
  // consecutive entries (BlockIndex), so the next block is looked for right after it first.
  let lastAt = -1;
  let lastI = -1;
  // Block i is looked up (once in the GPU index, and only as far as needed) when some replica's
  // walk is at it; a replica whose GPU prefix is longer joins at its own start, matched[r], and
  // blocks before every walk's start are skipped, not looked up.
  let i = from;
  // Blocks [.., warmedTo) were warmed.
  let warmedTo = from;
  while (i < keys.length && count > 0) {
    if (i >= warmedTo) warmedTo = warmAhead(gpu, cpu, keys, i, count, matched, warmedTo);
    const key = keys[i]!;
    let gpuAt = UNKNOWN;
    let next = keys.length;
    for (let w = 0; w < count; ) {
      const r = walking[w]!;
      const start = matched[r]!;
      if (start > i) {
        if (start < next) next = start;
        w++;
        continue;
      }
      if (gpuAt === UNKNOWN) {
        gpuAt =
          lastI === i - 1 &&
          lastAt >= 0 &&
          lastAt + 1 < gpuArena.length &&
          gpuKeys[lastAt + 1] === key
            ? lastAt + 1
            : gpu.locate(key);
        lastAt = gpuAt;
        lastI = i;
      }
      if (gpuAt >= 0 && gpuArena.testBit(gpuAt, r)) {
        next = i + 1;
        w++;
        continue;
      }
      if (cpu.has(key, r)) {
        cpuBlocks[r]!++;
        next = i + 1;
        w++;
        continue;
      }
      // Its walk ends here: the prefix is [0, i).
      matched[r] = i;
      walking[w] = walking[--count]!;
    }
    i = next;
  }
  // Walks that ran to the end matched every block.
  for (let w = 0; w < count; w++) matched[walking[w]!] = keys.length;
}

/**
 * At block `i`, past the warmed blocks: warms blocks [i, i + WARM_AHEAD) for the walks that have
 * gone past their first block, and returns where the warmed blocks now end (`warmedTo` when
 * none has: none is warmed).
 */
function warmAhead(
  gpu: BlockIndex,
  cpu: TierKeys,
  keys: readonly BlockKey[],
  i: number,
  count: number,
  matched: Int32Array,
  warmedTo: number,
): number {
  const to = Math.min(keys.length, i + WARM_AHEAD);
  let any = false;
  for (let w = 0; w < count; w++) {
    const r = walking[w]!;
    if (matched[r]! >= i) continue;
    cpu.warm(keys, r, i, to);
    any = true;
  }
  if (!any) return warmedTo;
  gpu.prefetch(keys.slice(i, to));
  return to;
}
