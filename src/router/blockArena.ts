/**
 * Block entries (key + replica bitset) in insertion order, in two flat typed arrays. An engine
 * stores a prompt's blocks in one event, so a chain lands in consecutive entries and a prefix
 * walk reads it front to back (one cache line per few blocks, prefetched) instead of probing a
 * hash table once per block. Its owner frees an entry whose bitset empties and compacts the
 * arena (`move`, `free`, `truncate`), keeping the order of the live entries.
 */
import type { BlockKey } from '../kv/blockKey.ts';

const MIN_CAPACITY = 1024;
/** Key of a free entry: block keys are never negative. */
const FREE_KEY = -1;

export class BlockArena {
  /** Entry i's key. */
  keys: Float64Array;
  /** Entry i's bitset: `words` 32-bit words from i * words. */
  holders: Int32Array;
  #words: number;
  #length = 0;

  constructor(words: number, expectedEntries = 0) {
    const capacity = Math.max(MIN_CAPACITY, expectedEntries);
    this.#words = words;
    this.keys = new Float64Array(capacity);
    this.holders = new Int32Array(capacity * words);
  }

  /** Entries in use, live or free. */
  get length(): number {
    return this.#length;
  }

  /** 32-bit words per bitset. */
  get words(): number {
    return this.#words;
  }

  /** Adds an entry for `key` with no holder; returns its index. */
  append(key: BlockKey): number {
    if (this.#length === this.keys.length) this.#resize(this.keys.length * 2, this.#words);
    const at = this.#length++;
    this.keys[at] = key;
    return at;
  }

  /** Widens every bitset to `words` words (more replicas). */
  widen(words: number): void {
    if (words > this.#words) this.#resize(this.keys.length, words);
  }

  testBit(at: number, replica: number): boolean {
    return (this.holders[at * this.#words + (replica >>> 5)]! & (1 << (replica & 31))) !== 0;
  }

  /** Sets the bit; true when it was clear. */
  setBit(at: number, replica: number): boolean {
    const i = at * this.#words + (replica >>> 5);
    const bit = 1 << (replica & 31);
    const word = this.holders[i]!;
    if ((word & bit) !== 0) return false;
    this.holders[i] = word | bit;
    return true;
  }

  /** Clears the bit; true when it was set. */
  clearBit(at: number, replica: number): boolean {
    const i = at * this.#words + (replica >>> 5);
    const bit = 1 << (replica & 31);
    const word = this.holders[i]!;
    if ((word & bit) === 0) return false;
    this.holders[i] = word & ~bit;
    return true;
  }

  isEmpty(at: number): boolean {
    const holders = this.holders;
    const base = at * this.#words;
    let any = 0;
    for (let w = 0; w < this.#words; w++) any |= holders[base + w]!;
    return any === 0;
  }

  /** Whether entry `at` was freed (and not reused since). */
  isFree(at: number): boolean {
    return this.keys[at] === FREE_KEY;
  }

  /** Moves entry `from` to `to` (free) and frees `from`. */
  move(from: number, to: number): void {
    const { keys, holders } = this;
    const words = this.#words;
    keys[to] = keys[from]!;
    // A plain loop: a bitset is a few words, too short for copyWithin's call overhead.
    for (let w = 0; w < words; w++) holders[to * words + w] = holders[from * words + w]!;
    this.free(from);
  }

  /**
   * Frees entry `at`: no holder, and a key no block has, so a walk stepping onto it from the
   * entry before never takes it for the next block of its chain.
   */
  free(at: number): void {
    this.keys[at] = FREE_KEY;
    for (let w = 0; w < this.#words; w++) this.holders[at * this.#words + w] = 0;
  }

  /** Drops the entries from `length` on, which must all be free. */
  truncate(length: number): void {
    this.#length = length;
  }

  #resize(capacity: number, words: number): void {
    const keys = new Float64Array(capacity);
    keys.set(this.keys.subarray(0, this.#length));
    const holders = new Int32Array(capacity * words);
    if (words === this.#words) holders.set(this.holders.subarray(0, this.#length * words));
    else {
      for (let at = 0; at < this.#length; at++) {
        for (let w = 0; w < this.#words; w++) {
          holders[at * words + w] = this.holders[at * this.#words + w]!;
        }
      }
    }
    this.keys = keys;
    this.holders = holders;
    this.#words = words;
  }
}

/** Bitset words for `replicaCount` replicas, in whole pairs (64 replicas a pair). */
export function wordsFor(replicaCount: number): number {
  return Math.max(2, Math.ceil(replicaCount / 64) * 2);
}
