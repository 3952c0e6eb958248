/**
 * Block entries (key + holders) in insertion order, in flat typed arrays. An engine stores a
 * prompt's blocks in one event, so a chain lands in consecutive entries and a prefix walk reads
 * it front to back (one cache line per few blocks, prefetched) instead of probing a hash table
 * once per block. Its owner frees an entry whose last holder left and compacts the arena
 * (`move`, `free`, `truncate`), keeping the order of the live entries.
 *
 * Most blocks are held by one replica (a prompt's own blocks, on the replica it went to), so an
 * entry names its holder in one 32-bit word, `holder[at]`: a replica id (>= 0), or NO_HOLDER.
 * Only a block two or more replicas hold takes a bitset of the whole fleet, a set of `words`
 * words in the shared `pool`, and then `holder[at]` is `~base` (negative), base the set's first
 * word (not its number: the walk reads it without a multiply). An entry costs 12 bytes whatever
 * the fleet's size (a bitset per entry cost 8 + 4 x words: 56 bytes at 352 replicas, and that
 * grew with keys x fleet). A set whose holders fall back to one is returned
 * to the pool's free list and the entry names its last holder again, so the sets in use are
 * exactly the entries held twice or more.
 */
import type { BlockKey } from '../../kv/blockKey.ts';

const MIN_CAPACITY = 1024;
const MIN_SETS = 64;
/** Key of a free entry: block keys are never negative. */
const FREE_KEY = -1;
/**
 * `holder` of an entry no replica holds: a replica id so large that its word (id >>> 5) is
 * beyond any bitset, so `heldWord` reads it as no bit in every word without a branch of its own.
 */
export const NO_HOLDER = 0x7fffffff;
/** End of the pool's free list. */
const NO_SET = -1;

export class BlockArena {
  /** Entry i's key. */
  keys: Float64Array;
  /**
   * Entry i's holders: one replica id, NO_HOLDER, or `~base` for a set at `pool[base]`. Set when
   * the entry is appended, not filled ahead: zeros are pages the system maps only once written.
   */
  holder: Int32Array;
  /** Shared bitsets, `words` 32-bit words each; a free one's word 0 holds the next free base. */
  pool: Int32Array;
  /** Holders per set (0 for a free set). */
  #setHolders: Int32Array;
  #words: number;
  #length = 0;
  /** Sets ever handed out: [0, #setsUsed) are in use or on the free list. */
  #setsUsed = 0;
  /** Base of the first free set, or NO_SET. */
  #freeSet = NO_SET;
  #shared = 0;

  constructor(words: number, expectedEntries = 0) {
    const capacity = Math.max(MIN_CAPACITY, expectedEntries);
    this.#words = words;
    this.keys = new Float64Array(capacity);
    this.holder = new Int32Array(capacity);
    this.pool = new Int32Array(MIN_SETS * words);
    this.#setHolders = new Int32Array(MIN_SETS);
  }

  /** Entries in use, live or free. */
  get length(): number {
    return this.#length;
  }

  /** 32-bit words per bitset. */
  get words(): number {
    return this.#words;
  }

  /** Entries holding a shared bitset (held by two or more replicas). */
  get sharedSets(): number {
    return this.#shared;
  }

  /** Adds an entry for `key` with no holder; returns its index. */
  append(key: BlockKey): number {
    // Growing by half, not doubling: the arena is most of the index, and its slack and the
    // copy held while growing are both half as large.
    if (this.#length === this.keys.length) this.#resize(this.keys.length + (this.keys.length >> 1));
    const at = this.#length++;
    this.keys[at] = key;
    this.holder[at] = NO_HOLDER;
    return at;
  }

  /**
   * Widens every shared bitset to `words` words (more replicas): the sets move to their new
   * bases, and the shared entries and free-list links that name them follow (a scan of the
   * arena, as rare as the fleet passing a multiple of 64). Single holders stay as they are.
   */
  widen(words: number): void {
    if (words <= this.#words) return;
    const old = this.pool;
    const oldWords = this.#words;
    const rebase = (base: number): number => (base / oldWords) * words;
    const pool = new Int32Array(this.#setHolders.length * words);
    for (let s = 0; s < this.#setsUsed; s++) {
      for (let w = 0; w < oldWords; w++) pool[s * words + w] = old[s * oldWords + w]!;
      // A free set's word 0 is the next free base.
      if (this.#setHolders[s] === 0 && pool[s * words] !== NO_SET) {
        pool[s * words] = rebase(pool[s * words]!);
      }
    }
    if (this.#freeSet !== NO_SET) this.#freeSet = rebase(this.#freeSet);
    for (let at = 0; at < this.#length; at++) {
      const h = this.holder[at]!;
      if (h < 0) this.holder[at] = ~rebase(~h);
    }
    this.pool = pool;
    this.#words = words;
  }

  testBit(at: number, replica: number): boolean {
    const h = this.holder[at]!;
    if (h >= 0) return h === replica;
    return (this.pool[~h + (replica >>> 5)]! & (1 << (replica & 31))) !== 0;
  }

  /** Adds `replica` to the entry's holders; true when it was not one. */
  setBit(at: number, replica: number): boolean {
    const h = this.holder[at]!;
    if (h === NO_HOLDER) {
      this.holder[at] = replica;
      return true;
    }
    if (h === replica) return false;
    if (h >= 0) {
      // A second holder: the entry takes a set with both.
      const base = this.#takeSet();
      this.pool[base + (h >>> 5)]! |= 1 << (h & 31);
      this.pool[base + (replica >>> 5)]! |= 1 << (replica & 31);
      this.#setHolders[base / this.#words]! = 2;
      this.holder[at] = ~base;
      return true;
    }
    const i = ~h + (replica >>> 5);
    const bit = 1 << (replica & 31);
    const word = this.pool[i]!;
    if ((word & bit) !== 0) return false;
    this.pool[i] = word | bit;
    this.#setHolders[~h / this.#words]!++;
    return true;
  }

  /** Drops `replica` from the entry's holders; true when it was one. */
  clearBit(at: number, replica: number): boolean {
    const h = this.holder[at]!;
    if (h >= 0) {
      if (h !== replica) return false;
      this.holder[at] = NO_HOLDER;
      return true;
    }
    const base = ~h;
    const i = base + (replica >>> 5);
    const bit = 1 << (replica & 31);
    const word = this.pool[i]!;
    if ((word & bit) === 0) return false;
    this.pool[i] = word & ~bit;
    if (--this.#setHolders[base / this.#words]! === 1) this.holder[at] = this.#lastHolder(base);
    return true;
  }

  isEmpty(at: number): boolean {
    return this.holder[at] === NO_HOLDER;
  }

  /** Whether entry `at` was freed (and not reused since). */
  isFree(at: number): boolean {
    return this.keys[at] === FREE_KEY;
  }

  /** Moves entry `from` to `to` (free) and frees `from`; a shared set moves with it. */
  move(from: number, to: number): void {
    this.keys[to] = this.keys[from]!;
    this.holder[to] = this.holder[from]!;
    this.keys[from] = FREE_KEY;
    this.holder[from] = NO_HOLDER;
  }

  /**
   * Frees entry `at`: no holder, and a key no block has, so a walk stepping onto it from the
   * entry before never takes it for the next block of its chain.
   */
  free(at: number): void {
    const h = this.holder[at]!;
    if (h < 0) this.#releaseSet(~h);
    this.keys[at] = FREE_KEY;
    this.holder[at] = NO_HOLDER;
  }

  /** Drops the entries from `length` on, which must all be free. */
  truncate(length: number): void {
    this.#length = length;
  }

  /** The one replica left in the set at `base`, which goes back to the pool. */
  #lastHolder(base: number): number {
    let w = 0;
    while (this.pool[base + w] === 0) w++;
    const word = this.pool[base + w]!;
    this.#releaseSet(base);
    return w * 32 + 31 - Math.clz32(word & -word);
  }

  /** A zeroed set's base. */
  #takeSet(): number {
    let base = this.#freeSet;
    if (base !== NO_SET) {
      this.#freeSet = this.pool[base]!;
      this.pool[base] = 0;
    } else {
      if (this.#setsUsed === this.#setHolders.length) this.#growPool();
      base = this.#setsUsed++ * this.#words;
    }
    this.#shared++;
    return base;
  }

  #releaseSet(base: number): void {
    this.pool.fill(0, base, base + this.#words);
    this.pool[base] = this.#freeSet;
    this.#setHolders[base / this.#words] = 0;
    this.#freeSet = base;
    this.#shared--;
  }

  #growPool(): void {
    const sets = this.#setHolders.length + (this.#setHolders.length >> 1);
    const pool = new Int32Array(sets * this.#words);
    pool.set(this.pool);
    this.pool = pool;
    const counts = new Int32Array(sets);
    counts.set(this.#setHolders);
    this.#setHolders = counts;
  }

  #resize(capacity: number): void {
    const keys = new Float64Array(capacity);
    keys.set(this.keys.subarray(0, this.#length));
    const holder = new Int32Array(capacity);
    holder.set(this.holder.subarray(0, this.#length));
    this.keys = keys;
    this.holder = holder;
  }
}

/**
 * Word `w` of the holder bitset of an entry whose `holder` word is `h` (`pool` read from the same
 * arena): the walk's one read of holders, small enough to be inlined. A single holder (or
 * NO_HOLDER, whose word is past every bitset) sets at most one bit of one word; a shared one
 * reads its set.
 */
export function heldWord(h: number, pool: Int32Array, w: number): number {
  if (h >= 0) return h >>> 5 === w ? 1 << (h & 31) : 0;
  return pool[~h + w]!;
}

/** Bitset words for `replicaCount` replicas, in whole pairs (64 replicas a pair). */
export function wordsFor(replicaCount: number): number {
  return Math.max(2, Math.ceil(replicaCount / 64) * 2);
}
