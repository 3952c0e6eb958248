/**
 * Block key -> block id, an open-addressing hash table over one typed array. Keys are 53-bit
 * numbers that a JS Map hashes slowly (they are heap doubles, not small integers); this table
 * probes from a Fibonacci hash of their low 32 bits. Linear probing with backward-shift deletion
 * (no tombstones). It never holds more than the pool's block count, so it is sized once, at most
 * two-thirds full. A slot's key and block sit side by side, so a lookup touches one cache line;
 * a home slot is recomputed from the key rather than stored, since a second array would cost a
 * second cache miss on a large pool.
 */
import type { BlockKey } from './blockKey.ts';

const EMPTY = -1;

export class BlockKeyTable {
  /** Slot i holds its key at 2i and its block at 2i + 1; EMPTY keys mark free slots. */
  readonly #slots: Float64Array;
  readonly #mask: number;
  readonly #shift: number;
  #size = 0;
  /** What `touch` read, kept only so that its loads are not optimized away. */
  touched = 0;

  constructor(maxEntries: number) {
    let capacity = 16;
    while (capacity * 2 < maxEntries * 3) capacity *= 2;
    this.#slots = new Float64Array(capacity * 2).fill(EMPTY);
    this.#mask = capacity - 1;
    this.#shift = 32 - Math.log2(capacity);
  }

  get size(): number {
    return this.#size;
  }

  /** The block holding `key`, or -1. */
  get(key: BlockKey): number {
    const slot = this.#find(key);
    return slot === -1 ? -1 : this.#slots[2 * slot + 1]!;
  }

  has(key: BlockKey): boolean {
    return this.#find(key) !== -1;
  }

  /**
   * Loads the home slots of `keys[from, to)` without acting on them: the loads are independent,
   * so the CPU overlaps their cache misses and the operations that follow hit the cache.
   */
  touch(keys: ArrayLike<BlockKey>, from: number, to: number): void {
    const slots = this.#slots;
    let sink = 0;
    const mask = this.#mask;
    for (let i = from; i < to; i++) {
      const home = this.#home(keys[i]!);
      // A probe run often goes on past the home slot's cache line (four slots a line): three
      // slots on is either still in it or in the next one, which this loads too.
      sink += slots[2 * home]! + slots[2 * ((home + 3) & mask)]!;
    }
    this.touched = sink;
  }

  /** Adds `key` (which must be absent) -> `block`. */
  add(key: BlockKey, block: number): void {
    if (!this.addIfAbsent(key, block)) throw new Error(`key ${key} is already in the table`);
  }

  /** Adds `key` -> `block` unless `key` is present (then changes nothing); true when added. */
  addIfAbsent(key: BlockKey, block: number): boolean {
    const slots = this.#slots;
    let i = this.#home(key);
    while (slots[2 * i] !== EMPTY) {
      if (slots[2 * i] === key) return false;
      i = (i + 1) & this.#mask;
    }
    slots[2 * i] = key;
    slots[2 * i + 1] = block;
    this.#size++;
    return true;
  }

  delete(key: BlockKey): boolean {
    let hole = this.#find(key);
    if (hole === -1) return false;
    const slots = this.#slots;
    const mask = this.#mask;
    // Shift later entries of the probe run back into the hole while their home allows it.
    for (let j = (hole + 1) & mask; slots[2 * j] !== EMPTY; j = (j + 1) & mask) {
      const home = this.#home(slots[2 * j]!);
      const stays = hole <= j ? hole < home && home <= j : hole < home || home <= j;
      if (stays) continue;
      slots[2 * hole] = slots[2 * j]!;
      slots[2 * hole + 1] = slots[2 * j + 1]!;
      hole = j;
    }
    slots[2 * hole] = EMPTY;
    this.#size--;
    return true;
  }

  clear(): void {
    this.#slots.fill(EMPTY);
    this.#size = 0;
  }

  /** Every key held, in table order. */
  keys(): BlockKey[] {
    const out: BlockKey[] = [];
    const slots = this.#slots;
    for (let i = 0; i < slots.length; i += 2) if (slots[i] !== EMPTY) out.push(slots[i]!);
    return out;
  }

  /** Fibonacci hashing of the key's low 32 bits: the top bits of the product pick the slot. */
  #home(key: BlockKey): number {
    return Math.imul(key >>> 0, 0x9e3779b1) >>> this.#shift;
  }

  #find(key: BlockKey): number {
    const slots = this.#slots;
    let i = this.#home(key);
    for (;;) {
      const k = slots[2 * i]!;
      if (k === key) return i;
      if (k === EMPTY) return -1;
      i = (i + 1) & this.#mask;
    }
  }
}
