/**
 * Block keys: a chained 64-bit hash of (parent key, the block's token ids), computed as two
 * 32-bit lanes with Math.imul so no BigInt is touched on the hot path. A key is kept as a JS
 * number holding the top 53 bits of the hash (an exact Map key); `toWireHash` widens it to the
 * unsigned 64-bit integer vLLM publishes. `cache_salt` and a LoRA name seed the first block only,
 * so salted prompts never share a block with unsalted ones.
 */
export type BlockKey = number;

const TWO_POW_32 = 4294967296;
/** Seed lanes of the chain's root (no parent, no salt). */
const ROOT_HI = 0x5bd1e995;
const ROOT_LO = 0x27d4eb2f;

function fmix32(h: number): number {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) | 0;
}

function hashString(text: string, seed: number): number {
  let h = seed | 0;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return fmix32(h ^ text.length);
}

export interface KeyScope {
  /** Per-tenant or per-request salt (vLLM's `cache_salt`). */
  cacheSalt?: string | undefined;
  /** LoRA adapter name: different adapters give different KV for the same tokens. */
  loraName?: string | undefined;
}

/** The lanes a chain starts from: root, or root folded with salt and LoRA name. */
function rootLanes(scope: KeyScope | undefined): [number, number] {
  let hi = ROOT_HI;
  let lo = ROOT_LO;
  if (scope?.cacheSalt) {
    hi = hashString(scope.cacheSalt, hi ^ 0x73616c74);
    lo = hashString(scope.cacheSalt, lo ^ 0x0c5a17);
  }
  if (scope?.loraName) {
    hi = hashString(scope.loraName, hi ^ 0x6c6f7261);
    lo = hashString(scope.loraName, lo ^ 0x10ea);
  }
  return [hi, lo];
}

/** Hash lanes carried from one block to the next (module scratch: no allocation per block). */
let laneHi = 0;
let laneLo = 0;

/** Folds tokens[start, end) into the lanes and returns the block's key. */
function mixBlock(tokens: ArrayLike<number>, start: number, end: number): BlockKey {
  let hi = laneHi;
  let lo = laneLo;
  for (let i = start; i < end; i++) {
    const t = tokens[i]! | 0;
    hi = Math.imul(hi ^ t, 0x85ebca6b);
    hi = (hi << 13) | (hi >>> 19);
    lo = Math.imul(lo ^ t, 0xcc9e2d51);
    // `| 0` keeps the sum a 32-bit integer so the loop stays on V8's integer fast path.
    lo = (((lo << 17) | (lo >>> 15)) + hi) | 0;
  }
  hi = fmix32(hi ^ (end - start));
  lo = fmix32(lo ^ hi);
  // Chain from exactly what the key holds, so a key alone can be extended (extendBlockKey).
  laneHi = hi >>> 11;
  laneLo = lo;
  return laneHi * TWO_POW_32 + (lo >>> 0);
}

/**
 * Keys of every full block of `tokens` (a trailing partial block gets none: only full blocks
 * are cached, as in vLLM). `limitBlocks` stops early, e.g. when only a prefix matters.
 */
export function computeBlockKeys(
  tokens: ArrayLike<number>,
  blockSize: number,
  scope?: KeyScope,
  limitBlocks = Number.POSITIVE_INFINITY,
): BlockKey[] {
  const blocks = Math.min(Math.floor(tokens.length / blockSize), limitBlocks);
  const keys = new Array<BlockKey>(blocks);
  [laneHi, laneLo] = rootLanes(scope);
  for (let b = 0; b < blocks; b++) keys[b] = mixBlock(tokens, b * blockSize, (b + 1) * blockSize);
  return keys;
}

/** Key of one block given its parent's key (null for the first block) and its token ids. */
export function extendBlockKey(
  parent: BlockKey | null,
  blockTokens: ArrayLike<number>,
  scope?: KeyScope,
): BlockKey {
  if (parent === null) [laneHi, laneLo] = rootLanes(scope);
  else {
    laneHi = Math.floor(parent / TWO_POW_32);
    laneLo = parent | 0;
  }
  return mixBlock(blockTokens, 0, blockTokens.length);
}

/**
 * The unsigned 64-bit hash published on the wire: the 53-bit key shifted up with 11 mixed bits
 * below it. Injective, so a consumer can map wire hashes back to keys one to one.
 */
export function toWireHash(key: BlockKey): bigint {
  return (BigInt(key) << 11n) | BigInt(fmix32(key >>> 0) & 0x7ff);
}
