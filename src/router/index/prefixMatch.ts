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
import type { BlockKey } from '../../kv/blockKey.ts';
import { heldWord, NO_HOLDER } from './blockArena.ts';
import type { BlockIndex } from './blockIndex.ts';
import { mayStartAt, type RouteOverlay } from './overlay.ts';

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
  const { keys: entryKeys, holder, pool, length } = index.arena;
  const predicted = overlay !== null && overlay.pending > 0 ? overlay.walk() : null;
  // A block's bucket of first keys: most are empty, and a walk takes in predictions only there.
  const starts = predicted === null ? null : overlay!.startBits;
  const ovHeld = scratch(words);
  // The words of `alive` with a replica still matching: after the first blocks, one or two.
  const live = liveWords(words);
  let liveCount = 0;
  for (let w = 0; w < words; w++) if (alive[w] !== 0) live[liveCount++] = w;
  if (liveCount === 0) return;
  const n = keys.length;
  let at = -1;
  let i = 0;
  while (i < n) {
    const key = keys[i]!;
    at = at >= 0 && at + 1 < length && entryKeys[at + 1] === key ? at + 1 : index.locate(key);
    if (starts !== null && mayStartAt(starts, key)) predicted!.enter(key, i);
    // Read once per block; a key no replica holds reads as NO_HOLDER, no bit in any word.
    const h = at >= 0 ? holder[at]! : NO_HOLDER;
    let lacking = 0;
    for (let l = 0; l < liveCount; l++) {
      const w = live[l]!;
      lacking |= alive[w]! & ~heldWord(h, pool, w);
    }
    if (lacking !== 0) {
      if (predicted !== null) {
        ovHeld.fill(0, 0, words);
        predicted.orPredicted(key, i, nowMs, ovHeld);
      }
      let kept = 0;
      for (let l = 0; l < liveCount; l++) {
        const w = live[l]!;
        const was = alive[w]!;
        let held = heldWord(h, pool, w);
        if (predicted !== null) held |= ovHeld[w]!;
        const keep = was & held;
        if (keep !== was) dropAll(was & ~keep, w, i, outBlocks);
        alive[w] = keep;
        if (keep !== 0) live[kept++] = w;
      }
      liveCount = kept;
      if (liveCount === 0) return;
    }
    i++;
    if (liveCount > 2 || at < 0) continue;
    const skipped = skipHeldRun(index, keys, i, at, alive, live, liveCount, starts);
    i += skipped - at;
    at = skipped;
  }
  for (let l = 0; l < liveCount; l++) {
    const w = live[l]!;
    dropAll(alive[w]!, w, n, outBlocks);
  }
}

/**
 * The common stretch: the replicas still matching sit in one or two words (two owners of a
 * prefix among 64 replicas are in different words half the time) and the chain runs on in
 * the next entries, each held by all of them, with no prediction starting there. Such a
 * block changes nothing (matchPrefix's step would find nothing lacking), so it is passed over
 * with a key compare and a test per word; the first block that is not goes through the step.
 * Returns the arena entry of the last block passed over (`at` when none is).
 */
function skipHeldRun(
  index: BlockIndex,
  keys: readonly BlockKey[],
  i: number,
  at: number,
  alive: Int32Array,
  live: Int32Array,
  liveCount: number,
  starts: Int32Array | null,
): number {
  const n = keys.length;
  const { keys: entryKeys, holder, pool, length } = index.arena;
  const w0 = live[0]!;
  const want0 = alive[w0]!;
  // With one word, the second test repeats the first (no branch on the count in the loop).
  const w1 = liveCount === 2 ? live[1]! : w0;
  const want1 = alive[w1]!;
  // An entry naming one holder covers the replicas still matching only when that is the one
  // replica left (`solo`, else -1, which no holder is); a shared one is read word by word.
  const solo =
    liveCount === 1 && (want0 & (want0 - 1)) === 0 ? w0 * 32 + 31 - Math.clz32(want0) : -1;
  while (i < n && at + 1 < length) {
    const key = keys[i]!;
    if (entryKeys[at + 1] !== key) break;
    const h = holder[at + 1]!;
    if (h !== solo) {
      if (h >= 0) break;
      const set = ~h;
      if (((want0 & ~pool[set + w0]!) | (want1 & ~pool[set + w1]!)) !== 0) break;
    }
    if (starts !== null && mayStartAt(starts, key)) break;
    at++;
    i++;
  }
  return at;
}

/** Walk scratch, reused (one walk at a time: the core is synchronous). */
let ovScratch = new Int32Array(2);
let liveScratch = new Int32Array(2);

function scratch(words: number): Int32Array {
  if (ovScratch.length < words) ovScratch = new Int32Array(words);
  return ovScratch;
}

function liveWords(words: number): Int32Array {
  if (liveScratch.length < words) liveScratch = new Int32Array(words);
  return liveScratch;
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
