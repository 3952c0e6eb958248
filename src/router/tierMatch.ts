/**
 * A replica's cached prefix through its CPU tier. The GPU walk (prefixMatch.ts) stops at the
 * first block a replica lacks on the GPU; a block its CPU tier holds is still a hit, reloaded
 * over PCIe instead of recomputed, so the prefix goes on while each block is in either tier.
 * Walked per replica that has CPU blocks at all (none: nothing to do), with a table probe per
 * block: the tier is for prefixes the GPU pool could not keep.
 */
import type { BlockKey } from '../kv/blockKey.ts';
import type { BlockIndex } from './blockIndex.ts';

/**
 * For each replica id in `ids`, extends `matched[r]` (blocks, from the GPU walk) through the
 * blocks either index holds and writes into `cpuBlocks[r]` how many of the matched blocks only
 * the CPU tier holds.
 */
export function extendThroughTier(
  gpu: BlockIndex,
  cpu: BlockIndex,
  keys: readonly BlockKey[],
  ids: readonly number[],
  matched: Int32Array,
  cpuBlocks: Int32Array,
): void {
  for (const r of ids) {
    cpuBlocks[r] = 0;
    if (cpu.blockCount(r) === 0) continue;
    let i = matched[r]!;
    let onlyCpu = 0;
    for (; i < keys.length; i++) {
      const key = keys[i]!;
      if (gpu.has(key, r)) continue;
      if (!cpu.has(key, r)) break;
      onlyCpu++;
    }
    matched[r] = i;
    cpuBlocks[r] = onlyCpu;
  }
}
