/**
 * Block key <-> block id for a pool of `blocks` blocks: each block's key in one array
 * (`keyOfBlock`, NO_KEY when it holds none), and an open-addressing hash table of block ids
 * keyed by those keys. Keys are 53-bit numbers that a JS Map hashes slowly (they are heap
 * doubles, not small integers); the table probes from a Fibonacci hash of their low 32 bits.
 * Linear probing with backward-shift deletion (no tombstones). It never holds more keys than
 * blocks, so it is sized once, at most two-thirds full.
 *
 * A slot holds only a block id (4 bytes) and a probe compares the block's key in `keyOfBlock`:
 * the pool needs that array anyway, so a key is stored once, and the table is a quarter of a
 * table of (key, block) pairs (16 bytes a slot): 0.5 MB instead of 1.3 MB for a 35k-block pool,
 * which is what a fleet of hundreds of simulated replicas holds per replica.
 */
import type { BlockKey } from './blockKey.ts';

const EMPTY = -1;
/** `keyOfBlock` of a block that holds no key: block keys are never negative. */
export const NO_KEY = -1;

export class BlockKeyTable {
  /** Block b's key, NO_KEY when it holds none (read only: change it through the table). */
  readonly keyOfBlock: Float64Array;
  /** Block ids; EMPTY marks a free slot. */
  readonly #slots: Int32Array;
  readonly #mask: number;
  readonly #shift: number;
  #size = 0;
  /** What `touch` read, kept only so that its loads are not optimized away. */
  touched = 0;

  constructor(blocks: number) {
    let capacity = 16;
    while (capacity * 2 < blocks * 3) capacity *= 2;
    this.keyOfBlock = new Float64Array(blocks).fill(NO_KEY);
    this.#slots = new Int32Array(capacity).fill(EMPTY);
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
   * Loads the home slots of `keys[from, to)` without acting on them: the loads are independent,
   * so the CPU overlaps their cache misses and the operations that follow hit the cache.
   */
  touch(keys: ArrayLike<BlockKey>, from: number, to: number): void {
    const slots = this.#slots;
    let sink = 0;
    const mask = this.#mask;
    for (let i = from; i < to; i++) {
      const home = this.#home(keys[i]!);
      // A probe run often goes on past the home slot's cache line (sixteen slots a line): a few
      // slots on is either still in it or in the next one, which this loads too.
      sink += slots[home]! + slots[(home + 3) & mask]!;
    }
    this.touched = sink;
  }

  /** Adds `key` (which must be absent) -> `block` (which must hold no key). */
  add(key: BlockKey, block: number): void {
    if (!this.addIfAbsent(key, block)) throw new Error(`key ${key} is already in the table`);
  }

  /**
   * Adds `key` -> `block` unless `key` is present (then changes nothing); true when added.
   * `block` must hold no key.
   */
  addIfAbsent(key: BlockKey, block: number): boolean {
    const slots = this.#slots;
    const keyOf = this.keyOfBlock;
    let i = this.#home(key);
    for (let b = slots[i]!; b !== EMPTY; b = slots[i]!) {
      if (keyOf[b] === key) return false;
      i = (i + 1) & this.#mask;
    }
    slots[i] = block;
    keyOf[block] = key;
    this.#size++;
    return true;
  }

  /** Forgets `key`; its block holds no key after. */
  delete(key: BlockKey): boolean {
    let hole = this.#find(key);
    if (hole === -1) return false;
    const slots = this.#slots;
    const keyOf = this.keyOfBlock;
    const mask = this.#mask;
    keyOf[slots[hole]!] = NO_KEY;
    // Shift later entries of the probe run back into the hole while their home allows it.
    for (let j = (hole + 1) & mask; slots[j] !== EMPTY; j = (j + 1) & mask) {
      const home = this.#home(keyOf[slots[j]!]!);
      const stays = hole <= j ? hole < home && home <= j : hole < home || home <= j;
      if (stays) continue;
      slots[hole] = slots[j]!;
      hole = j;
    }
    slots[hole] = EMPTY;
    this.#size--;
    return true;
  }

  clear(): void {
    this.#slots.fill(EMPTY);
    this.keyOfBlock.fill(NO_KEY);
    this.#size = 0;
  }

  /** Every key held, in table order. */
  keys(): BlockKey[] {
    const out: BlockKey[] = [];
    const slots = this.#slots;
    for (let i = 0; i < slots.length; i++) {
      const b = slots[i]!;
      if (b !== EMPTY) out.push(this.keyOfBlock[b]!);
    }
    return out;
  }

  /** Fibonacci hashing of the key's low 32 bits: the top bits of the product pick the slot. */
  #home(key: BlockKey): number {
    return Math.imul(key >>> 0, 0x9e3779b1) >>> this.#shift;
  }

  #find(key: BlockKey): number {
    const slots = this.#slots;
    const keyOf = this.keyOfBlock;
    let i = this.#home(key);
    for (;;) {
      const b = slots[i]!;
      if (b === EMPTY) return -1;
      if (keyOf[b] === key) return i;
      i = (i + 1) & this.#mask;
    }
  }
}
