/**
 * Block key -> bitset of replicas, stored inline in a SlotTable record after `headerF64`
 * float64 words of the owner's own (the key is the first). Two 32-bit words cover 64 replicas;
 * `widen` rebuilds the table with wider bitsets for more. Shared by the prefix index (no header
 * beyond the key) and the route overlay (key + expiry).
 */
import type { BlockKey } from '../kv/blockKey.ts';
import { SlotTable } from './slotTable.ts';

export class BitsetTable {
  readonly headerF64: number;
  #table: SlotTable;
  #words: number;

  constructor(replicaCount: number, headerF64: number, expectedKeys = 0) {
    this.headerF64 = headerF64;
    this.#words = wordsFor(replicaCount);
    this.#table = new SlotTable(headerF64 + this.#words / 2, expectedKeys);
  }

  /** 32-bit words per bitset. */
  get words(): number {
    return this.#words;
  }

  get size(): number {
    return this.#table.size;
  }

  /** The underlying table, for tight loops (read only). */
  get table(): SlotTable {
    return this.#table;
  }

  /** i32 offset of `slot`'s first bitset word. */
  bitsAt(slot: number): number {
    return (slot * this.#table.strideF64 + this.headerF64) * 2;
  }

  /** Makes room for replica ids below `count`, rebuilding with wider bitsets if needed. */
  widen(count: number): void {
    const words = wordsFor(count);
    if (words <= this.#words) return;
    const old = this.#table;
    const oldWords = this.#words;
    const table = new SlotTable(this.headerF64 + words / 2, old.size);
    for (let s = 0; s < old.slots; s++) {
      if (!old.isOccupied(s)) continue;
      const slot = table.insert(old.keyAt(s));
      for (let h = 1; h < this.headerF64; h++) {
        table.f64[slot * table.strideF64 + h] = old.f64[s * old.strideF64 + h]!;
      }
      const from = (s * old.strideF64 + this.headerF64) * 2;
      const to = (slot * table.strideF64 + this.headerF64) * 2;
      for (let w = 0; w < oldWords; w++) table.i32[to + w] = old.i32[from + w]!;
    }
    this.#table = table;
    this.#words = words;
  }

  testBit(slot: number, replica: number): boolean {
    return (this.#table.i32[this.bitsAt(slot) + (replica >>> 5)]! & (1 << (replica & 31))) !== 0;
  }

  /** Sets the bit; true when it was clear. */
  setBit(slot: number, replica: number): boolean {
    const at = this.bitsAt(slot) + (replica >>> 5);
    const bit = 1 << (replica & 31);
    const i32 = this.#table.i32;
    if ((i32[at]! & bit) !== 0) return false;
    i32[at] = i32[at]! | bit;
    return true;
  }

  /** Clears the bit, deleting the key when no bit is left; true when it was set. */
  clearBit(slot: number, replica: number): boolean {
    const at = this.bitsAt(slot) + (replica >>> 5);
    const bit = 1 << (replica & 31);
    const i32 = this.#table.i32;
    if ((i32[at]! & bit) === 0) return false;
    i32[at] = i32[at]! & ~bit;
    if (this.isEmpty(slot)) this.#table.removeAt(slot);
    return true;
  }

  isEmpty(slot: number): boolean {
    const i32 = this.#table.i32;
    const base = this.bitsAt(slot);
    let any = 0;
    for (let w = 0; w < this.#words; w++) any |= i32[base + w]!;
    return any === 0;
  }

  /** Clears `replica` everywhere (a full scan); returns how many bits were set. */
  clearReplica(replica: number): number {
    const table = this.#table;
    let cleared = 0;
    for (let slot = 0; slot < table.slots; slot++) {
      // A deletion may shift another record into `slot`: look at it again before moving on.
      while (table.isOccupied(slot)) {
        const size = table.size;
        if (!this.clearBit(slot, replica)) break;
        cleared++;
        if (table.size === size) break;
      }
    }
    return cleared;
  }

  find(key: BlockKey): number {
    return this.#table.find(key);
  }

  insert(key: BlockKey): number {
    return this.#table.insert(key);
  }
}

function wordsFor(replicaCount: number): number {
  return Math.max(2, Math.ceil(replicaCount / 64) * 2);
}
