/**
 * Block keys in least- to most-recently-used order, each held once: the order a Map keeps when
 * a touched key is deleted and set again, at O(1) a touch, a removal and an eviction (the
 * approximate index's records of what it sent where). A Map finds its oldest key by iterating
 * from its start, past every entry deleted since its last rehash: O(size) an eviction once it is
 * full and churning, which made long runs ~10-20x slower.
 *
 * Each key sits in a slot. A chained hash table (buckets of the key's Fibonacci hash, chained
 * through the slots, as BlockKeyTable does for the 53-bit keys a Map hashes slowly) finds a
 * key's slot, and a doubly linked list through the slots keeps the order. A slot's fields sit
 * together, its key and time in one 16-byte record and its three links in another, so a touch
 * or an eviction reads two cache lines a slot where one array a field read five.
 *
 * Slots are allocated as keys arrive, doubling; a key keeps its slot when they grow.
 */
import type { BlockKey } from './blockKey.ts';

/** What `oldest` and `popOldest` return when no key is held (block keys are never negative). */
export const NO_OLDEST = -1;
/** No slot: an empty bucket, the end of a chain or of the list. */
const NONE = -1;
/** Slots allocated first (then doubled as keys arrive). */
const FIRST_SLOTS = 64;
/** About four buckets a slot, as BlockKeyTable has. */
const BUCKETS_PER_SLOT = 4;
/** Per slot in `#links`: the next slot in its bucket's chain, the list's previous and next. */
const CHAIN = 0;
const PREV = 1;
const NEXT = 2;
const LINKS = 4;

export class KeyLru {
  /** First slot per bucket. */
  #heads: Int32Array;
  #shift: number;
  /** Per slot: its key at 2 x slot, when it was last touched at 2 x slot + 1. */
  #keyAt: Float64Array;
  /** Per slot: CHAIN, PREV and NEXT at LINKS x slot. */
  #links: Int32Array;
  /** Least and most recent slots. */
  #first = NONE;
  #last = NONE;
  #size = 0;
  /** Slots holding no key, a stack of `#freeCount`. */
  #free: Int32Array;
  #freeCount = 0;
  constructor() {
    const slots = FIRST_SLOTS;
    this.#keyAt = new Float64Array(2 * slots);
    this.#links = new Int32Array(LINKS * slots);
    this.#free = new Int32Array(slots);
    [this.#heads, this.#shift] = buckets(slots);
    this.#freeAll();
  }

  get size(): number {
    return this.#size;
  }

  has(key: BlockKey): boolean {
    return this.#find(key) !== NONE;
  }

  /**
   * Makes `key` the most recent, touched at `atMs`, adding it when absent; true when it was
   * added.
   */
  touch(key: BlockKey, atMs = 0): boolean {
    const bucket = this.#bucket(key);
    const keyAt = this.#keyAt;
    const links = this.#links;
    let slot = this.#heads[bucket]!;
    while (slot !== NONE && keyAt[2 * slot] !== key) slot = links[LINKS * slot + CHAIN]!;
    if (slot !== NONE) {
      keyAt[2 * slot + 1] = atMs;
      if (slot !== this.#last) {
        this.#unlinkOrder(slot);
        this.#append(slot);
      }
      return false;
    }
    if (this.#freeCount === 0) this.#grow();
    slot = this.#free[--this.#freeCount]!;
    // #grow may have replaced the arrays and the buckets.
    const b = this.#bucket(key);
    this.#keyAt[2 * slot] = key;
    this.#keyAt[2 * slot + 1] = atMs;
    this.#links[LINKS * slot + CHAIN] = this.#heads[b]!;
    this.#heads[b] = slot;
    this.#append(slot);
    this.#size++;
    return true;
  }

  /** Adds `key` as the most recent when absent; a held key keeps its place (Map.set). */
  addIfAbsent(key: BlockKey): boolean {
    return this.has(key) ? false : this.touch(key);
  }

  /** Removes `key`; false when it is not held. */
  delete(key: BlockKey): boolean {
    const slot = this.#find(key);
    if (slot === NONE) return false;
    this.#release(slot);
    return true;
  }

  /** The least recent key, or NO_OLDEST when none is held. */
  oldest(): BlockKey {
    return this.#first === NONE ? NO_OLDEST : this.#keyAt[2 * this.#first]!;
  }

  /** When the least recent key was touched, or NaN when none is held. */
  oldestAtMs(): number {
    return this.#first === NONE ? Number.NaN : this.#keyAt[2 * this.#first + 1]!;
  }

  /** Removes and returns the least recent key, or NO_OLDEST when none is held. */
  popOldest(): BlockKey {
    const slot = this.#first;
    if (slot === NONE) return NO_OLDEST;
    const key = this.#keyAt[2 * slot]!;
    this.#release(slot);
    return key;
  }

  clear(): void {
    this.#heads.fill(NONE);
    this.#first = NONE;
    this.#last = NONE;
    this.#size = 0;
    this.#freeAll();
  }

  /** Keys held, least recent first; for tests and inspection. */
  keys(): BlockKey[] {
    const out: BlockKey[] = [];
    for (let s = this.#first; s !== NONE; s = this.#links[LINKS * s + NEXT]!) {
      out.push(this.#keyAt[2 * s]!);
    }
    return out;
  }

  #bucket(key: BlockKey): number {
    return Math.imul(key >>> 0, 0x9e3779b1) >>> this.#shift;
  }

  #find(key: BlockKey): number {
    const keyAt = this.#keyAt;
    const links = this.#links;
    let slot = this.#heads[this.#bucket(key)]!;
    while (slot !== NONE && keyAt[2 * slot] !== key) slot = links[LINKS * slot + CHAIN]!;
    return slot;
  }

  /** Takes the key out of its chain and the list, and frees the slot. */
  #release(slot: number): void {
    const links = this.#links;
    const bucket = this.#bucket(this.#keyAt[2 * slot]!);
    let s = this.#heads[bucket]!;
    if (s === slot) this.#heads[bucket] = links[LINKS * slot + CHAIN]!;
    else {
      while (links[LINKS * s + CHAIN] !== slot) s = links[LINKS * s + CHAIN]!;
      links[LINKS * s + CHAIN] = links[LINKS * slot + CHAIN]!;
    }
    this.#unlinkOrder(slot);
    this.#free[this.#freeCount++] = slot;
    this.#size--;
  }

  #unlinkOrder(slot: number): void {
    const links = this.#links;
    const prev = links[LINKS * slot + PREV]!;
    const next = links[LINKS * slot + NEXT]!;
    if (prev === NONE) this.#first = next;
    else links[LINKS * prev + NEXT] = next;
    if (next === NONE) this.#last = prev;
    else links[LINKS * next + PREV] = prev;
  }

  #append(slot: number): void {
    const links = this.#links;
    links[LINKS * slot + PREV] = this.#last;
    links[LINKS * slot + NEXT] = NONE;
    if (this.#last === NONE) this.#first = slot;
    else links[LINKS * this.#last + NEXT] = slot;
    this.#last = slot;
  }

  /** Every slot free, the lowest on top. */
  #freeAll(): void {
    const slots = this.#free.length;
    for (let i = 0; i < slots; i++) this.#free[i] = slots - 1 - i;
    this.#freeCount = slots;
  }

  /**
   * Doubles the slots. Called with every slot holding a key: slots [0, old) keep theirs and
   * their places in the list, the chains are rebuilt for the new buckets, and [old, new) are
   * free.
   */
  #grow(): void {
    const oldSlots = this.#free.length;
    const slots = 2 * oldSlots;
    const keyAt = new Float64Array(2 * slots);
    keyAt.set(this.#keyAt);
    const links = new Int32Array(LINKS * slots);
    links.set(this.#links);
    [this.#heads, this.#shift] = buckets(slots);
    this.#keyAt = keyAt;
    this.#links = links;
    for (let slot = 0; slot < oldSlots; slot++) {
      const b = this.#bucket(keyAt[2 * slot]!);
      links[LINKS * slot + CHAIN] = this.#heads[b]!;
      this.#heads[b] = slot;
    }
    this.#free = new Int32Array(slots);
    this.#freeCount = 0;
    for (let slot = slots - 1; slot >= oldSlots; slot--) this.#free[this.#freeCount++] = slot;
  }
}

/** Empty buckets for `slots` slots, and the shift that picks one from a hash. */
function buckets(slots: number): [Int32Array, number] {
  const count = 2 ** Math.max(4, Math.round(Math.log2(slots * BUCKETS_PER_SLOT)));
  return [new Int32Array(count).fill(NONE), 32 - Math.log2(count)];
}
