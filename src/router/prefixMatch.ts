/**
 * Longest cached prefix of one request on every replica, in a single walk over its block keys:
 * a bitset of replicas still matching is ANDed with each block's holders (indexed, or predicted
 * by the overlay and unexpired) and the walk stops as soon as it empties. A replica drops out at
 * the first block it lacks, so its match is a true prefix, as the engine's prefix cache reuses.
 * A chain's blocks sit in consecutive arena entries (BlockIndex), so each block is looked for
 * right after the previous one first and the key table is probed only where the chain breaks.
 * The overlay's predictions are gathered as the walk meets their first keys, and read only for
 * a block that some replica still matching lacks in the index: elsewhere they change nothing.
 */
import type { BlockKey } from '../kv/blockKey.ts';
import type { BlockIndex } from './blockIndex.ts';
import type { RouteOverlay } from './overlay.ts';

/**
 * Writes into `outBlocks[r]` the matched prefix length in blocks of every replica r whose bit is
 * set in `alive` (which the walk consumes); other entries are left as they are. `alive` has
 * `index.words` words.
 */
export function matchPrefix(
  index: BlockIndex,
  overlay: RouteOverlay | null,
  keys: readonly BlockKey[],
  alive: Int32Array,
  nowMs: number,
  outBlocks: Int32Array,
): void {
  const words = index.words;
  const { keys: entryKeys, holders, length } = index.arena;
  const predicted = overlay !== null && overlay.pending > 0 ? overlay.walk() : null;
  const ovHeld = new Int32Array(words);
  const n = keys.length;
  let at = -1;
  for (let i = 0; i < n; i++) {
    const key = keys[i]!;
    at = at >= 0 && at + 1 < length && entryKeys[at + 1] === key ? at + 1 : index.locate(key);
    predicted?.enter(key, i);
    const base = at * words;
    let lacking = 0;
    for (let w = 0; w < words; w++) lacking |= alive[w]! & ~(at >= 0 ? holders[base + w]! : 0);
    if (lacking === 0) continue;
    if (predicted !== null) {
      ovHeld.fill(0);
      predicted.orPredicted(key, i, nowMs, ovHeld);
    }
    let any = 0;
    for (let w = 0; w < words; w++) {
      const was = alive[w]!;
      if (was === 0) continue;
      let held = at >= 0 ? holders[base + w]! : 0;
      if (predicted !== null) held |= ovHeld[w]!;
      const keep = was & held;
      if (keep !== was) dropAll(was & ~keep, w, i, outBlocks);
      alive[w] = keep;
      any |= keep;
    }
    if (any === 0) return;
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
