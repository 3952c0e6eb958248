/**
 * Block key -> block id, an open-addressing hash table of block ids over one Int32Array. Keys are
 * 53-bit numbers that a JS Map hashes slowly (they are heap doubles, not small integers); this
 * table probes from a Fibonacci hash of their low 32 bits. Linear probing with backward-shift
 * deletion (no tombstones).
 *
 * A slot holds only a block id (4 bytes); the block's key lives in `keyOf`, one float64 per block,
 * which the table shares with its owner (the block pool reads a block's key there) and alone
 * writes: `add` sets a block's key, `delete` and `clear` reset it to NO_KEY. So a block holds a
 * key exactly while the table maps that key to it. A slot a quarter the size of a key + block pair
 * lets the table keep three slots or more per entry, at most a third full, in half the bytes a pair
 * table two-thirds full took: probe runs are shorter, and a probe compares `keyOf[block]`, an
 * array the owner reads anyway. It never holds more than `keyOf.length` entries, so it is sized
 * once.
 *
 * Each keyed block also knows its slot (`#slotOf`, kept as entries move), so evicting a block's
 * key (`deleteBlock`, the pool's hot path) starts at its hole without probing for it.
 */
import type { BlockKey } from './blockKey.ts';

/** Key of a block that holds none (block keys are never negative). */
export const NO_KEY = -1;
const EMPTY = -1;

export class BlockKeyTable {
  /** Block id per slot; EMPTY marks a free slot. */
  readonly #slots: Int32Array;
  /** Key per block, NO_KEY for a block that holds none (shared with the owner, read only there). */
  readonly keyOf: Float64Array;
  /** Slot per block, valid while the block holds a key. */
  readonly #slotOf: Int32Array;
  readonly #mask: number;
  readonly #shift: number;
  #size = 0;
  /** What `touch` read, kept only so that its loads are not optimized away. */
  touched = 0;

  /** A table for blocks 0..numBlocks-1, every one holding no key. */
  constructor(numBlocks: number) {
    let capacity = 16;
    while (capacity < numBlocks * 3) capacity *= 2;
    this.#slots = new Int32Array(capacity).fill(EMPTY);
    this.keyOf = new Float64Array(numBlocks).fill(NO_KEY);
    this.#slotOf = new Int32Array(numBlocks);
    this.#mask = capacity - 1;
    this.#shift = 32 - Math.log2(capacity);
  }

  get size(): number {
    return this.#size;
  }

  /** The block holding `key`, or -1. */
  get(key: BlockKey): number {
    const slot = this.#find(key);
    return slot === -1 ? -1 : this.#slots[slot]!;
  }

  has(key: BlockKey): boolean {
    return this.#find(key) !== -1;
  }

  /**
   * Loads the home slots of `keys[from, to)`, and the keys of the blocks there, without acting on
   * them: the loads are independent, so the CPU overlaps their cache misses and the operations
   * that follow hit the cache.
   */
  touch(keys: ArrayLike<BlockKey>, from: number, to: number): void {
    const slots = this.#slots;
    const keyOf = this.keyOf;
    let sink = 0;
    for (let i = from; i < to; i++) {
      const block = slots[this.#home(keys[i]!)]!;
      if (block !== EMPTY) sink += keyOf[block]!;
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
    const slots = this.#slots;
    const keyOf = this.keyOf;
    let i = this.#home(key);
    for (;;) {
      const held = slots[i]!;
      if (held === EMPTY) break;
      if (keyOf[held] === key) return false;
      i = (i + 1) & this.#mask;
    }
    if (keyOf[block] !== NO_KEY) throw new Error(`block ${block} already holds a key`);
    slots[i] = block;
    keyOf[block] = key;
    this.#slotOf[block] = i;
    this.#size++;
    return true;
  }

  /** Removes `key`; its block then holds no key. False when `key` is absent. */
  delete(key: BlockKey): boolean {
    const slot = this.#find(key);
    if (slot === -1) return false;
    this.#empty(slot);
    return true;
  }

  /** Removes the key `block` holds; false when it holds none. */
  deleteBlock(block: number): boolean {
    if (this.keyOf[block] === NO_KEY) return false;
    this.#empty(this.#slotOf[block]!);
    return true;
  }

  /**
   * Loads what `deleteBlock` reads for each of `blocks[from, to)`: the slot after the block's own
   * (the first that the shift back looks at) and that slot's key, as `touch` does for keys.
   */
  touchBlocks(blocks: ArrayLike<number>, from: number, to: number): void {
    const slots = this.#slots;
    const slotOf = this.#slotOf;
    const keyOf = this.keyOf;
    const mask = this.#mask;
    let sink = 0;
    for (let i = from; i < to; i++) {
      const block = blocks[i]!;
      if (keyOf[block] === NO_KEY) continue;
      const after = slots[(slotOf[block]! + 1) & mask]!;
      if (after !== EMPTY) sink += keyOf[after]!;
    }
    this.touched = sink;
  }

  /** Drops every key; every block then holds none. */
  clear(): void {
    this.#slots.fill(EMPTY);
    this.keyOf.fill(NO_KEY);
    this.#size = 0;
  }

  /** Every key held, in table order. */
  keys(): BlockKey[] {
    const out: BlockKey[] = [];
    const slots = this.#slots;
    for (let i = 0; i < slots.length; i++) {
      if (slots[i] !== EMPTY) out.push(this.keyOf[slots[i]!]!);
    }
    return out;
  }

  /** Empties `hole`: its block holds no key, and later entries of the run shift back into it. */
  #empty(hole: number): void {
    const slots = this.#slots;
    const slotOf = this.#slotOf;
    const keyOf = this.keyOf;
    const mask = this.#mask;
    keyOf[slots[hole]!] = NO_KEY;
    // Shift later entries of the probe run back into the hole while their home allows it.
    for (let j = (hole + 1) & mask; slots[j] !== EMPTY; j = (j + 1) & mask) {
      const moved = slots[j]!;
      const home = this.#home(keyOf[moved]!);
      const stays = hole <= j ? hole < home && home <= j : hole < home || home <= j;
      if (stays) continue;
      slots[hole] = moved;
      slotOf[moved] = hole;
      hole = j;
    }
    slots[hole] = EMPTY;
    this.#size--;
  }

  /** Fibonacci hashing of the key's low 32 bits: the top bits of the product pick the slot. */
  #home(key: BlockKey): number {
    return Math.imul(key >>> 0, 0x9e3779b1) >>> this.#shift;
  }

  #find(key: BlockKey): number {
    const slots = this.#slots;
    const keyOf = this.keyOf;
    let i = this.#home(key);
    for (;;) {
      const held = slots[i]!;
      if (held === EMPTY) return -1;
      if (keyOf[held] === key) return i;
      i = (i + 1) & this.#mask;
    }
  }
}
