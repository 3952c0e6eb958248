/**
 * Block key -> block id, an open-addressing hash table over typed arrays. Keys are 53-bit numbers
 * that a JS Map hashes slowly (they are heap doubles, not small integers); this table probes
 * from a Fibonacci hash of their low 32 bits. Linear probing with backward-shift deletion (no
 * tombstones), kept at most half full so probe runs stay short: it never holds more than the
 * pool's block count. A slot's key and block sit side by side in one Float64Array, so a
 * lookup (cold on a large pool) touches one cache line, not two.
 */
import type { BlockKey } from './blockKey.ts';

const EMPTY = -1;

export class BlockKeyTable {
  /** Slot i holds its key at 2i and its block at 2i + 1; EMPTY keys mark free slots. */
  readonly #slots: Float64Array;
  /** Each slot's home slot, kept so probing never re-derives it from a double. */
  readonly #homes: Int32Array;
  readonly #mask: number;
  readonly #shift: number;
  #size = 0;

  constructor(maxEntries: number) {
    let capacity = 16;
    while (capacity < maxEntries * 2) capacity *= 2;
    this.#slots = new Float64Array(capacity * 2).fill(EMPTY);
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
    return slot === -1 ? -1 : this.#slots[2 * slot + 1]!;
  }

  has(key: BlockKey): boolean {
    return this.#find(key) !== -1;
  }

  /** Adds `key` (which must be absent) -> `block`. */
  add(key: BlockKey, block: number): void {
    if (!this.addIfAbsent(key, block)) throw new Error(`key ${key} is already in the table`);
  }

  /** Adds `key` -> `block` unless `key` is present (then changes nothing); true when added. */
  addIfAbsent(key: BlockKey, block: number): boolean {
    const slots = this.#slots;
    const home = this.#home(key);
    let i = home;
    while (slots[2 * i] !== EMPTY) {
      if (slots[2 * i] === key) return false;
      i = (i + 1) & this.#mask;
    }
    slots[2 * i] = key;
    slots[2 * i + 1] = block;
    this.#homes[i] = home;
    this.#size++;
    return true;
  }

  delete(key: BlockKey): boolean {
    let hole = this.#find(key);
    if (hole === -1) return false;
    const slots = this.#slots;
    const homes = this.#homes;
    const mask = this.#mask;
    // Shift later entries of the probe run back into the hole while their home allows it.
    for (let j = (hole + 1) & mask; slots[2 * j] !== EMPTY; j = (j + 1) & mask) {
      const home = homes[j]!;
      const stays = hole <= j ? hole < home && home <= j : hole < home || home <= j;
      if (stays) continue;
      slots[2 * hole] = slots[2 * j]!;
      slots[2 * hole + 1] = slots[2 * j + 1]!;
      homes[hole] = home;
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
