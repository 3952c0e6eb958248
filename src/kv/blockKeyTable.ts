/**
 * Block key -> block id: a hash table chained through the blocks themselves. Keys are 53-bit
 * numbers that a JS Map hashes slowly (they are heap doubles, not small integers); this table
 * picks a bucket from a Fibonacci hash of their low 32 bits.
 *
 * A bucket holds the first block of its chain and each block the next (`#next`, one int32 a
 * block). The block's key lives in `keyOf`, one float64 per block, which the table shares with
 * its owner (the block pool reads a block's key there) and alone writes: `add` sets a block's
 * key, `delete` and `clear` reset it to NO_KEY. So a block holds a key exactly while the table
 * maps that key to it.
 *
 * Why chains and not open addressing: the pool's hot path evicts keys by block as it reuses
 * blocks (`deleteBlock`). Unlinking a block reads its bucket and, rarely, walks a short chain;
 * deleting from a linear-probing table shifts the rest of the probe run back, with an
 * unpredictable branch per entry (bench/schedulerAb.ts: the admission of a cold 8,000-token
 * prompt 0.73x to 0.77x of the probing table's time). With about four buckets a block the table
 * takes 15 to 27 B a block (the probing one took 16 to 28). It never holds more than
 * `keyOf.length` entries, so it is sized once.
 */
import type { BlockKey } from './blockKey.ts';

/** Key of a block that holds none (block keys are never negative). */
export const NO_KEY = -1;
/** No block: an empty bucket or the end of a chain. */
const NONE = -1;
/** What `addOrMove` returns when it added the key, and when another block kept it. */
export const ADDED = -1;
export const HELD = -2;
/**
 * About four buckets a block (the power of two nearest, so 2.8 to 5.7): chains hold about a
 * quarter of an entry on average when every block holds a key. More costs more than it saves
 * once the pools outgrow the caches: 7.5 a block made a 352-replica simulation ~1.2x slower.
 */
const BUCKETS_PER_BLOCK = 4;

export class BlockKeyTable {
  /** First block per bucket; NONE for an empty bucket. */
  readonly #heads: Int32Array;
  /** Per block: the next block in its chain (NONE at the end). */
  readonly #next: Int32Array;
  /** Key per block, NO_KEY for a block that holds none (shared with the owner, read only there). */
  readonly keyOf: Float64Array;
  readonly #shift: number;
  #size = 0;
  /** What `touch` read, kept only so that its loads are not optimized away. */
  touched = 0;

  /** A table for blocks 0..numBlocks-1, every one holding no key. */
  constructor(numBlocks: number) {
    const buckets = 2 ** Math.max(4, Math.round(Math.log2(numBlocks * BUCKETS_PER_BLOCK)));
    this.#heads = new Int32Array(buckets).fill(NONE);
    this.#next = new Int32Array(numBlocks);
    this.keyOf = new Float64Array(numBlocks).fill(NO_KEY);
    this.#shift = 32 - Math.log2(buckets);
  }

  get size(): number {
    return this.#size;
  }

  /** The block holding `key`, or -1. */
  get(key: BlockKey): number {
    return this.#find(key);
  }

  has(key: BlockKey): boolean {
    return this.#find(key) !== NONE;
  }

  /**
   * Loads the buckets of `keys[from, to)`, and the keys of their first blocks, without acting on
   * them: the loads are independent, so the CPU overlaps their cache misses and the operations
   * that follow hit the cache.
   */
  touch(keys: ArrayLike<BlockKey>, from: number, to: number): void {
    const heads = this.#heads;
    const keyOf = this.keyOf;
    let sink = 0;
    for (let i = from; i < to; i++) {
      const block = heads[this.#bucket(keys[i]!)]!;
      if (block !== NONE) sink += keyOf[block]!;
    }
    this.touched = sink;
  }

  /** Adds `key` (which must be absent) -> `block` (which must hold no key). */
  add(key: BlockKey, block: number): void {
    if (!this.addIfAbsent(key, block)) throw new Error(`key ${key} is already in the table`);
  }

  /**
   * Adds `key` -> `block` (a block holding no key) unless `key` is present (then changes
   * nothing); true when added, and then `keyOf[block]` is `key`.
   */
  addIfAbsent(key: BlockKey, block: number): boolean {
    const keyOf = this.keyOf;
    const next = this.#next;
    const bucket = this.#bucket(key);
    const first = this.#heads[bucket]!;
    for (let b = first; b !== NONE; b = next[b]!) if (keyOf[b] === key) return false;
    if (keyOf[block] !== NO_KEY) throw new Error(`block ${block} already holds a key`);
    next[block] = first;
    this.#heads[bucket] = block;
    keyOf[block] = key;
    this.#size++;
    return true;
  }

  /**
   * As `addIfAbsent`, except that a `key` held by a block at or past `movableFrom` moves to
   * `block`, in its place in the chain (one walk, no second lookup). Returns ADDED, HELD (held by
   * a block before `movableFrom`: nothing changes), or the block the key moved from.
   */
  addOrMove(key: BlockKey, block: number, movableFrom: number): number {
    const keyOf = this.keyOf;
    const next = this.#next;
    const bucket = this.#bucket(key);
    let prev = NONE;
    for (let b = this.#heads[bucket]!; b !== NONE; prev = b, b = next[b]!) {
      if (keyOf[b] !== key) continue;
      if (b < movableFrom) return HELD;
      this.#replace(bucket, prev, b, block);
      return b;
    }
    if (keyOf[block] !== NO_KEY) throw new Error(`block ${block} already holds a key`);
    next[block] = this.#heads[bucket]!;
    this.#heads[bucket] = block;
    keyOf[block] = key;
    this.#size++;
    return ADDED;
  }

  /** Moves the key `from` holds to `to` (which holds none), in its place in the chain. */
  move(from: number, to: number): void {
    const bucket = this.#bucket(this.keyOf[from]!);
    let prev = NONE;
    for (let b = this.#heads[bucket]!; b !== from; b = this.#next[b]!) prev = b;
    this.#replace(bucket, prev, from, to);
  }

  /** Removes `key`; its block then holds no key. False when `key` is absent. */
  delete(key: BlockKey): boolean {
    const block = this.#find(key);
    if (block === NONE) return false;
    this.#unlink(block);
    return true;
  }

  /** Removes the key `block` holds; false when it holds none. */
  deleteBlock(block: number): boolean {
    if (this.keyOf[block] === NO_KEY) return false;
    this.#unlink(block);
    return true;
  }

  /**
   * Loads what `deleteBlock` reads first for each of `blocks[from, to)`, their buckets, as
   * `touch` does for keys.
   */
  touchBlocks(blocks: ArrayLike<number>, from: number, to: number): void {
    const heads = this.#heads;
    const keyOf = this.keyOf;
    let sink = 0;
    for (let i = from; i < to; i++) {
      const key = keyOf[blocks[i]!]!;
      if (key !== NO_KEY) sink += heads[this.#bucket(key)]!;
    }
    this.touched = sink;
  }

  /** `touchBlocks` for one block. */
  touchBlock(block: number): void {
    const key = this.keyOf[block]!;
    if (key !== NO_KEY) this.touched += this.#heads[this.#bucket(key)]!;
  }

  /** Drops every key; every block then holds none. */
  clear(): void {
    this.#heads.fill(NONE);
    this.keyOf.fill(NO_KEY);
    this.#size = 0;
  }

  /** Every key held, bucket by bucket. */
  keys(): BlockKey[] {
    const out: BlockKey[] = [];
    const heads = this.#heads;
    const next = this.#next;
    for (let i = 0; i < heads.length; i++) {
      for (let b = heads[i]!; b !== NONE; b = next[b]!) out.push(this.keyOf[b]!);
    }
    return out;
  }

  /** Puts `to` where `from` sits in `bucket`'s chain, after `prev` (NONE: at its head). */
  #replace(bucket: number, prev: number, from: number, to: number): void {
    const next = this.#next;
    const keyOf = this.keyOf;
    if (keyOf[to] !== NO_KEY) throw new Error(`block ${to} already holds a key`);
    next[to] = next[from]!;
    if (prev === NONE) this.#heads[bucket] = to;
    else next[prev] = to;
    keyOf[to] = keyOf[from]!;
    keyOf[from] = NO_KEY;
  }

  /** Takes `block` (which holds a key) out of its chain; it then holds no key. */
  #unlink(block: number): void {
    const next = this.#next;
    const bucket = this.#bucket(this.keyOf[block]!);
    let b = this.#heads[bucket]!;
    if (b === block) this.#heads[bucket] = next[block]!;
    else {
      while (next[b] !== block) b = next[b]!;
      next[b] = next[block]!;
    }
    this.keyOf[block] = NO_KEY;
    this.#size--;
  }

  /** Fibonacci hashing of the key's low 32 bits: the top bits of the product pick the bucket. */
  #bucket(key: BlockKey): number {
    return Math.imul(key >>> 0, 0x9e3779b1) >>> this.#shift;
  }

  /** The block holding `key`, or NONE. */
  #find(key: BlockKey): number {
    const keyOf = this.keyOf;
    const next = this.#next;
    let b = this.#heads[this.#bucket(key)]!;
    while (b !== NONE && keyOf[b] !== key) b = next[b]!;
    return b;
  }
}
