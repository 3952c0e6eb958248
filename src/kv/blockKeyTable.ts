/**
 * Block key -> block id, an open-addressing hash table over typed arrays. Keys are 53-bit numbers
 * that a JS Map hashes slowly (they are heap doubles, not small integers); this table probes
 * from a Fibonacci hash of their low 32 bits. Linear probing with backward-shift deletion (no
 * tombstones), kept at most a quarter full so probe runs stay short: it never holds more than
 * the pool's block count.
 */
import type { BlockKey } from './blockKey.ts';

const EMPTY = -1;

export class BlockKeyTable {
  readonly #keys: Float64Array;
  readonly #values: Int32Array;
  /** Each slot's home slot, kept so probing never re-derives it from a double. */
  readonly #homes: Int32Array;
  readonly #mask: number;
  readonly #shift: number;
  #size = 0;

  constructor(maxEntries: number) {
    let capacity = 16;
    while (capacity < maxEntries * 4) capacity *= 2;
    this.#keys = new Float64Array(capacity).fill(EMPTY);
    this.#values = new Int32Array(capacity);
    this.#homes = new Int32Array(capacity);
    this.#mask = capacity - 1;
    this.#shift = 32 - Math.log2(capacity);
  }

  get size(): number {
    return this.#size;
  }

  /** The block holding `key`, or -1. */
  get(key: BlockKey): number {
    const slot = this.#find(key);
    return slot === -1 ? -1 : this.#values[slot]!;
  }

  has(key: BlockKey): boolean {
    return this.#find(key) !== -1;
  }

  /** Adds `key` (which must be absent) -> `block`. */
  add(key: BlockKey, block: number): void {
    const keys = this.#keys;
    const home = this.#home(key);
    let i = home;
    while (keys[i] !== EMPTY) {
      if (keys[i] === key) throw new Error(`key ${key} is already in the table`);
      i = (i + 1) & this.#mask;
    }
    keys[i] = key;
    this.#values[i] = block;
    this.#homes[i] = home;
    this.#size++;
  }

  delete(key: BlockKey): boolean {
    let hole = this.#find(key);
    if (hole === -1) return false;
    const keys = this.#keys;
    const homes = this.#homes;
    const mask = this.#mask;
    // Shift later entries of the probe run back into the hole while their home allows it.
    for (let j = (hole + 1) & mask; keys[j] !== EMPTY; j = (j + 1) & mask) {
      const home = homes[j]!;
      const stays = hole <= j ? hole < home && home <= j : hole < home || home <= j;
      if (stays) continue;
      keys[hole] = keys[j]!;
      this.#values[hole] = this.#values[j]!;
      homes[hole] = home;
      hole = j;
    }
    keys[hole] = EMPTY;
    this.#size--;
    return true;
  }

  clear(): void {
    this.#keys.fill(EMPTY);
    this.#size = 0;
  }

  /** Every key held, in table order. */
  keys(): BlockKey[] {
    const out: BlockKey[] = [];
    for (const key of this.#keys) if (key !== EMPTY) out.push(key);
    return out;
  }

  /** Fibonacci hashing of the key's low 32 bits: the top bits of the product pick the slot. */
  #home(key: BlockKey): number {
    return Math.imul(key >>> 0, 0x9e3779b1) >>> this.#shift;
  }

  #find(key: BlockKey): number {
    const keys = this.#keys;
    let i = this.#home(key);
    for (;;) {
      const k = keys[i]!;
      if (k === key) return i;
      if (k === EMPTY) return -1;
      i = (i + 1) & this.#mask;
    }
  }
}
