/**
 * Block keys in least- to most-recently-stored order, at most `maxKeys` of them, for a store
 * that mostly appends new keys and evicts its oldest: the CPU tier (cpuTier.ts). Holds the same
 * order as KeyLru (keyLru.ts) does for the same calls, in fewer cache lines a call.
 *
 * The order is a ring of keys by sequence number: a store writes the next entry, an eviction
 * reads the oldest live one, both where the last call left off (sequential, in cache). A key
 * that leaves from elsewhere (a load, a drop) or is stored again marks its old entry dead, and
 * an eviction steps over dead entries. A hash table maps a key to its entry's sequence number,
 * both in one 16-byte slot (open addressing, linear probing, backward-shift deletion, at most
 * three quarters full). A store and the eviction it causes then read two slots of the table at
 * random, where KeyLru's linked lists read five or six lines (a bucket, the slot's key and
 * links, the next key's links, the evicted key's bucket).
 *
 * When the ring is full of live and dead entries (it has room for at least three times
 * `maxKeys`), the live ones slide down in order and their slots are told their new sequence
 * numbers: at most one table probe per dead entry, and rare while the tier is full and evicting
 * (evictions free the ring's oldest entries).
 *
 * The table stores key + 1 (0: an empty slot), so that a new table is zeros whose pages are
 * only mapped when first written; a block key is an integer below 2^53, so key + 1 is exact.
 *
 * A lookup of a key the ring lacks (most of the CPU tier's: each block the GPU computes is
 * looked up, and about three in four are not there) first reads a counting filter a quarter
 * the table's size in bytes: per filter cell, how many held keys hash there (FILTER_CELLS_PER_SLOT
 * cells a slot, so at most one cell in five is taken), and a key whose cell counts none is
 * absent without a read of the table. A cell that reaches 255 stays there (it only ever says
 * "maybe").
 */
import type { BlockKey } from './blockKey.ts';

/** What `popOldest` returns when no key is held (block keys are never negative). */
export const NO_OLDEST = -1;
/** A ring entry whose key left or was stored again later. */
const DEAD = -1;
/** 2^-32: multiplying by it is exact, as dividing by 2^32 is. */
const TWO_POW_MINUS_32 = 1 / 4294967296;
/** Filter cells per table slot, a power of two (log2 below). */
const FILTER_CELLS_PER_SLOT = 4;
const FILTER_BITS = 2;
/** A filter cell that stopped counting. */
const SATURATED = 255;

export class KeyRing {
  readonly maxKeys: number;
  /** Per slot: key + 1 (0: empty) at 2 x slot, its ring entry's sequence number at 2 x slot + 1. */
  readonly #table: Float64Array;
  readonly #mask: number;
  readonly #shift: number;
  /** Per cell, held keys whose hash falls there (see the file's comment). */
  readonly #filter: Uint8Array;
  /** Keys by sequence number & #ringMask; DEAD where the key left or moved on. */
  readonly #ring: Float64Array;
  readonly #ringMask: number;
  /** Sequence numbers of the oldest entry (live or dead) and of the next one to write. */
  #head = 0;
  #tail = 0;
  #size = 0;
  /** What `warm` read, kept only so that its loads are not optimized away. */
  warmed = 0;

  constructor(maxKeys: number) {
    if (!Number.isInteger(maxKeys) || maxKeys < 1) {
      throw new RangeError(`maxKeys must be an integer >= 1, got ${maxKeys}`);
    }
    this.maxKeys = maxKeys;
    const slots = powerOfTwoAtLeast(Math.ceil((4 * maxKeys) / 3) + 1);
    this.#table = new Float64Array(2 * slots);
    this.#mask = slots - 1;
    this.#shift = Math.clz32(slots) + 1;
    this.#filter = new Uint8Array(FILTER_CELLS_PER_SLOT * slots);
    const entries = powerOfTwoAtLeast(3 * maxKeys);
    this.#ring = new Float64Array(entries);
    this.#ringMask = entries - 1;
  }

  get size(): number {
    return this.#size;
  }

  has(key: BlockKey): boolean {
    return this.#filter[this.#cell(key)] !== 0 && this.#find(key) >= 0;
  }

  /**
   * Loads the home slots of `keys` and of the `oldest` least recent keys without acting on them:
   * the loads are independent, so the CPU overlaps their cache misses, and the stores, lookups
   * and evictions that follow find the slots in cache instead of waiting on memory one key at a
   * time.
   */
  warm(keys: readonly BlockKey[], oldest = 0): void {
    const table = this.#table;
    const filter = this.#filter;
    let sink = 0;
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      // A key the filter rules out needs no slot.
      if (filter[this.#cell(key)] !== 0) sink += table[2 * this.#home(key)]!;
    }
    const ring = this.#ring;
    for (let seq = this.#head, n = 0; n < oldest && seq < this.#tail; seq++) {
      const key = ring[seq & this.#ringMask]!;
      if (key === DEAD) continue;
      sink += table[2 * this.#home(key)]!;
      n++;
    }
    this.warmed = sink;
  }

  /** Makes `key` the most recent, adding it when absent; true when it was added. */
  touch(key: BlockKey): boolean {
    const table = this.#table;
    const held = key + 1;
    let slot = this.#home(key);
    for (;;) {
      const at = table[2 * slot]!;
      if (at === held) break;
      if (at === 0) {
        if (this.#size === this.maxKeys) {
          throw new RangeError(`a KeyRing of ${this.maxKeys} keys is full`);
        }
        // #append may compact, which rewrites sequence numbers only: the slot stays empty.
        table[2 * slot + 1] = this.#append(key);
        table[2 * slot] = held;
        const cell = this.#cell(key);
        if (this.#filter[cell] !== SATURATED) this.#filter[cell]!++;
        this.#size++;
        return true;
      }
      slot = (slot + 1) & this.#mask;
    }
    const seq = table[2 * slot + 1]!;
    if (seq !== this.#tail - 1) {
      this.#ring[seq & this.#ringMask] = DEAD;
      table[2 * slot + 1] = this.#append(key);
    }
    return false;
  }

  /** Removes `key`; false when it is not held. */
  delete(key: BlockKey): boolean {
    if (this.#filter[this.#cell(key)] === 0) return false;
    const slot = this.#find(key);
    if (slot < 0) return false;
    this.#ring[this.#table[2 * slot + 1]! & this.#ringMask] = DEAD;
    this.#removeAt(slot);
    return true;
  }

  /** Removes and returns the least recent key, or NO_OLDEST when none is held. */
  popOldest(): BlockKey {
    if (this.#size === 0) return NO_OLDEST;
    const ring = this.#ring;
    const ringMask = this.#ringMask;
    let key = ring[this.#head & ringMask]!;
    while (key === DEAD) key = ring[++this.#head & ringMask]!;
    this.#head++;
    this.#removeAt(this.#find(key));
    return key;
  }

  clear(): void {
    this.#table.fill(0);
    this.#filter.fill(0);
    this.#head = this.#tail;
    this.#size = 0;
  }

  /** Keys held, least recent first; for tests and inspection. */
  keys(): BlockKey[] {
    const out: BlockKey[] = [];
    for (let seq = this.#head; seq < this.#tail; seq++) {
      const key = this.#ring[seq & this.#ringMask]!;
      if (key !== DEAD) out.push(key);
    }
    return out;
  }

  /** Home slot: both 32-bit halves of the key folded, then Fibonacci hashing for the top bits. */
  #home(key: BlockKey): number {
    return Math.imul((key >>> 0) ^ ((key * TWO_POW_MINUS_32) | 0), 0x9e3779b1) >>> this.#shift;
  }

  /** The key's filter cell: the same hash as its home, FILTER_BITS more of it. */
  #cell(key: BlockKey): number {
    return (
      Math.imul((key >>> 0) ^ ((key * TWO_POW_MINUS_32) | 0), 0x9e3779b1) >>>
      (this.#shift - FILTER_BITS)
    );
  }

  #find(key: BlockKey): number {
    const table = this.#table;
    const held = key + 1;
    for (let slot = this.#home(key); ; slot = (slot + 1) & this.#mask) {
      const at = table[2 * slot]!;
      if (at === held) return slot;
      if (at === 0) return -1;
    }
  }

  /** Writes `key` as the newest ring entry; returns its sequence number. */
  #append(key: BlockKey): number {
    if (this.#tail - this.#head > this.#ringMask) this.#compact();
    this.#ring[this.#tail & this.#ringMask] = key;
    return this.#tail++;
  }

  /** Slides the live entries down over the dead ones, in order, and repoints their slots. */
  #compact(): void {
    const ring = this.#ring;
    const ringMask = this.#ringMask;
    const table = this.#table;
    let write = this.#head;
    for (let read = this.#head; read < this.#tail; read++) {
      const key = ring[read & ringMask]!;
      if (key === DEAD) continue;
      if (read !== write) {
        ring[write & ringMask] = key;
        table[2 * this.#find(key) + 1] = write;
      }
      write++;
    }
    this.#tail = write;
  }

  /**
   * Empties `slot`; each later key of its run moves into the hole when the hole lies between
   * its home and where it sits, so every key stays reachable from its home.
   */
  #removeAt(slot: number): void {
    const table = this.#table;
    const mask = this.#mask;
    const cell = this.#cell(table[2 * slot]! - 1);
    if (this.#filter[cell] !== SATURATED) this.#filter[cell]!--;
    let hole = slot;
    for (let next = (hole + 1) & mask; ; next = (next + 1) & mask) {
      const held = table[2 * next]!;
      if (held === 0) break;
      const from = this.#home(held - 1);
      if (((next - from) & mask) >= ((next - hole) & mask)) {
        table[2 * hole] = held;
        table[2 * hole + 1] = table[2 * next + 1]!;
        hole = next;
      }
    }
    table[2 * hole] = 0;
    this.#size--;
  }
}

function powerOfTwoAtLeast(n: number): number {
  let p = 16;
  while (p < n) p *= 2;
  return p;
}
