/**
 * Longest cached prefix of one request on every replica, in a single walk over its block keys:
 * a bitset of replicas still matching is ANDed with each block's holders (indexed, or predicted
 * by the overlay and unexpired) and the walk stops as soon as it empties. A replica drops out at
 * the first block it lacks, so its match is a true prefix, as the engine's prefix cache reuses.
 * Keys are looked up CHUNK_BLOCKS at a time before their bits are read, so the probes (cache
 * misses on a large index) overlap instead of queueing behind the bit arithmetic.
 */
import type { BlockKey } from '../kv/blockKey.ts';
import type { BlockIndex } from './blockIndex.ts';
import type { RouteOverlay } from './overlay.ts';

const CHUNK_BLOCKS = 32;

/**
 * Writes into `outBlocks[r]` the matched prefix length in blocks of every replica r whose bit is
 * set in `alive` (which the walk consumes); other entries are left as they are. `alive` has
 * `index.bits.words` words; the overlay, when given, must be as wide.
 */
export function matchPrefix(
  index: BlockIndex,
  overlay: RouteOverlay | null,
  keys: readonly BlockKey[],
  alive: Int32Array,
  nowMs: number,
  outBlocks: Int32Array,
): void {
  const words = index.bits.words;
  const table = index.bits.table;
  const i32 = table.i32;
  const stride = table.strideF64;
  const useOverlay = overlay !== null && overlay.size > 0;
  const ovTable = overlay?.bits.table;
  const slots = new Int32Array(CHUNK_BLOCKS);
  const ovBits = new Int32Array(CHUNK_BLOCKS);
  const n = keys.length;
  for (let start = 0; start < n; start += CHUNK_BLOCKS) {
    const end = Math.min(n, start + CHUNK_BLOCKS);
    for (let i = start; i < end; i++) slots[i - start] = table.find(keys[i]!);
    if (useOverlay && ovTable) {
      const ovStride = ovTable.strideF64;
      for (let i = start; i < end; i++) {
        const slot = ovTable.find(keys[i]!);
        // i32 offset of the live prediction bitset, or -1.
        ovBits[i - start] =
          slot >= 0 && ovTable.f64[slot * ovStride + 1]! > nowMs ? (slot * ovStride + 2) * 2 : -1;
      }
    }
    for (let i = start; i < end; i++) {
      const slot = slots[i - start]!;
      const ov = useOverlay ? ovBits[i - start]! : -1;
      const base = slot >= 0 ? (slot * stride + 1) * 2 : -1;
      let any = 0;
      for (let w = 0; w < words; w++) {
        const was = alive[w]!;
        if (was === 0) continue;
        let held = base >= 0 ? i32[base + w]! : 0;
        if (ov >= 0) held |= ovTable!.i32[ov + w]!;
        const keep = was & held;
        if (keep !== was) dropAll(was & ~keep, w, i, outBlocks);
        alive[w] = keep;
        any |= keep;
      }
      if (any === 0) return;
    }
  }
  for (let w = 0; w < words; w++) dropAll(alive[w]!, w, n, outBlocks);
}

/** outBlocks[r] = blocks for every replica r in bitset word `w`. */
function dropAll(bits: number, w: number, blocks: number, outBlocks: Int32Array): void {
  while (bits !== 0) {
    const low = bits & -bits;
    outBlocks[w * 32 + 31 - Math.clz32(low)] = blocks;
    bits ^= low;
  }
}

/** A bitset of `words` 32-bit words with the given replica ids set. */
export function replicaMask(ids: Iterable<number>, words: number): Int32Array {
  const mask = new Int32Array(words);
  for (const id of ids) mask[id >>> 5] = mask[id >>> 5]! | (1 << (id & 31));
  return mask;
}
