/**
 * The block-key functions as they were before the unrolled fast path (src/kv/blockKey.ts),
 * kept unchanged as the model that test/kv/blockKey.fastPath.test.ts holds the current code to:
 * the keys are the wire's, so every key must stay the same.
 */
export type BlockKey = number;

const TWO_POW_32 = 4294967296;
/** The words a chain's first block takes as its parent (no salt, no LoRA). */
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

/** The first block's parent words: the root, or the root folded with salt and LoRA name. */
function rootParent(scope: KeyScope | undefined): [number, number] {
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

/** Token lanes start from constants, not from the parent, so they need not wait for it. */
const SEED_A = 0x2545f491;
const SEED_B = 0x61c88647;
const SEED_C = 0x3c6ef372;
const SEED_D = 0x7f4a7c15;
const M_A = 0x85ebca6b | 0;
const M_B = 0xcc9e2d51 | 0;
const M_C = 0x1b873593;
const M_D = 0xe6546b65 | 0;

/** What `foldTokens` leaves: two words of the block's tokens and length (no allocation). */
const folded = new Int32Array(2);

/**
 * Folds tokens[start, end) into `folded`, independently of the parent. Token j of the block goes
 * into lane j % 4: four multiply chains the CPU runs side by side, where a single chain through
 * every token would wait on each multiply in turn.
 */
function foldTokens(tokens: ArrayLike<number>, start: number, end: number): void {
  let a = SEED_A;
  let b = SEED_B;
  let c = SEED_C;
  let d = SEED_D;
  let i = start;
  // Math.imul and the shifts keep every lane a 32-bit integer, on V8's integer fast path.
  for (; i + 4 <= end; i += 4) {
    a = Math.imul(a ^ tokens[i]!, M_A);
    a = (a << 13) | (a >>> 19);
    b = Math.imul(b ^ tokens[i + 1]!, M_B);
    b = (b << 13) | (b >>> 19);
    c = Math.imul(c ^ tokens[i + 2]!, M_C);
    c = (c << 13) | (c >>> 19);
    d = Math.imul(d ^ tokens[i + 3]!, M_D);
    d = (d << 13) | (d >>> 19);
  }
  if (i < end) a = Math.imul(a ^ tokens[i]!, M_A);
  if (i + 1 < end) b = Math.imul(b ^ tokens[i + 1]!, M_B);
  if (i + 2 < end) c = Math.imul(c ^ tokens[i + 2]!, M_C);
  // Each pair of lanes through a multiply, so that no two lanes cancel alike.
  folded[0] = a + Math.imul(c, 0x9e3779b1);
  folded[1] = (b + Math.imul(d, 0x7feb352d)) ^ (end - start);
}

/**
 * Keys of blocks [fromBlock, toBlock) of `tokens` (blocks of `blockSize` tokens) into
 * out[outAt..], chained from the parent words (hi, lo). Only this short finalizer depends on the
 * parent, so the CPU folds a block's tokens while it still finalizes the parent; the parent words
 * stay in locals (through memory or a call, they would lengthen that chain).
 */
function chainKeys(
  tokens: ArrayLike<number>,
  blockSize: number,
  fromBlock: number,
  toBlock: number,
  hi: number,
  lo: number,
  out: BlockKey[],
  outAt: number,
): void {
  for (let b = fromBlock; b < toBlock; b++) {
    foldTokens(tokens, b * blockSize, (b + 1) * blockSize);
    // (u + v, u + 2v) is a bijection of (u, v); fmix32 then mixes each word.
    const u = folded[0]! ^ hi;
    const v = folded[1]! ^ lo;
    const x = (u + v) | 0;
    // Keep exactly what the key holds, so a key alone can be extended (extendBlockKey).
    hi = fmix32(x) >>> 11;
    lo = fmix32((x + v) ^ 0x2c1b3c6d);
    out[outAt + b - fromBlock] = hi * TWO_POW_32 + (lo >>> 0);
  }
}

/** The words a key's children chain from: the root's for null (the first block). */
function parentWords(parent: BlockKey | null, scope: KeyScope | undefined): [number, number] {
  return parent === null ? rootParent(scope) : [Math.floor(parent / TWO_POW_32), parent | 0];
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
  const [hi, lo] = rootParent(scope);
  chainKeys(tokens, blockSize, 0, blocks, hi, lo, keys, 0);
  return keys;
}

/**
 * Appends to `out` the keys of full blocks `fromBlock..` of `tokens` (at most `limitBlocks` in
 * all), chained from `parent`, the key of block `fromBlock - 1` (null when fromBlock is 0): a
 * prompt that extends a known prefix hashes only its new blocks. Returns `out`.
 */
export function extendBlockKeys(
  tokens: ArrayLike<number>,
  blockSize: number,
  fromBlock: number,
  parent: BlockKey | null,
  out: BlockKey[],
  scope?: KeyScope,
  limitBlocks = Number.POSITIVE_INFINITY,
): BlockKey[] {
  const toBlock = Math.min(Math.floor(tokens.length / blockSize), limitBlocks);
  if (toBlock <= fromBlock) return out;
  const [hi, lo] = parentWords(parent, scope);
  chainKeys(tokens, blockSize, fromBlock, toBlock, hi, lo, out, out.length);
  return out;
}

/** extendBlockKey's output (no allocation per call). */
const oneKey: BlockKey[] = [0];

/** Key of one block given its parent's key (null for the first block) and its token ids. */
export function extendBlockKey(
  parent: BlockKey | null,
  blockTokens: ArrayLike<number>,
  scope?: KeyScope,
): BlockKey {
  const [hi, lo] = parentWords(parent, scope);
  chainKeys(blockTokens, blockTokens.length, 0, 1, hi, lo, oneKey, 0);
  return oneKey[0]!;
}

/**
 * The unsigned 64-bit hash published on the wire: the 53-bit key shifted up with 11 mixed bits
 * below it. Injective, so a consumer can map wire hashes back to keys one to one.
 */
export function toWireHash(key: BlockKey): bigint {
  return (BigInt(key) << 11n) | BigInt(fmix32(key >>> 0) & 0x7ff);
}
