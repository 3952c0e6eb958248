/**
 * Open-addressing hash table from block key to a fixed-size record of 64-bit words, all in one
 * ArrayBuffer: one cache line per probe and no per-key objects, so a million keys cost one
 * allocation. Linear probing, backward-shift deletion (no tombstones), load factor at most 1/2.
 * A record is `strideF64` float64 words; word 0 holds key + 1 (0 marks an empty slot), the rest
 * is payload that the owner reads through `f64` / `i32` at `slot * strideF64` (`* 2` for i32).
 */
import type { BlockKey } from '../../kv/blockKey.ts';
import { homeShift, keyHome, slotsFor } from './keyHome.ts';

export class SlotTable {
  readonly strideF64: number;
  /** Records as float64 words; key + 1 at the record's first word. */
  f64: Float64Array;
  /** The same memory as 32-bit words (payload bitsets). */
  i32: Int32Array;
  #mask: number;
  #shift: number;
  #size = 0;
  /** What `touch` read, kept only so that its loads are not optimized away. */
  touched = 0;

  constructor(strideF64: number, expectedKeys = 0) {
    this.strideF64 = strideF64;
    const slots = slotsFor(expectedKeys);
    this.#mask = slots - 1;
    this.#shift = homeShift(slots);
    const buffer = new ArrayBuffer(slots * strideF64 * 8);
    this.f64 = new Float64Array(buffer);
    this.i32 = new Int32Array(buffer);
  }

  get size(): number {
    return this.#size;
  }

  get slots(): number {
    return this.#mask + 1;
  }

  /**
   * Loads the home slot of each of `keys` without acting on it. The loads do not depend on each
   * other, so the CPU overlaps their cache misses; the probes that follow then hit the cache
   * instead of waiting on memory one key at a time.
   */
  touch(keys: ArrayLike<BlockKey>): void {
    const f64 = this.f64;
    const stride = this.strideF64;
    const mask = this.#mask;
    // A probe run often goes on past the home slot's cache line: the record `ahead` slots on is
    // either still in it or in the next line, which this loads too.
    const ahead = Math.max(1, Math.floor(8 / stride) - 1);
    let sink = 0;
    for (let i = 0; i < keys.length; i++) {
      const home = keyHome(keys[i]!, this.#shift);
      sink += f64[home * stride]! + f64[((home + ahead) & mask) * stride]!;
    }
    this.touched = sink;
  }

  /** Slot holding `key`, or -1. */
  find(key: BlockKey): number {
    const slot = this.#probe(key);
    return this.f64[slot * this.strideF64] === 0 ? -1 : slot;
  }

  /** Slot holding `key`, inserting it with a zeroed payload when absent. */
  insert(key: BlockKey): number {
    if ((this.#size + 1) * 2 > this.#mask + 1) this.#grow();
    const slot = this.#probe(key);
    const at = slot * this.strideF64;
    if (this.f64[at] === 0) {
      this.f64[at] = key + 1;
      this.#size++;
    }
    return slot;
  }

  /** Slot holding `key`, or the empty slot that ends its probe run (where it would go). */
  #probe(key: BlockKey): number {
    const f64 = this.f64;
    const stride = this.strideF64;
    const stored = key + 1;
    let slot = keyHome(key, this.#shift);
    for (;;) {
      const k = f64[slot * stride]!;
      if (k === stored || k === 0) return slot;
      slot = (slot + 1) & this.#mask;
    }
  }

  /** Key held at `slot` (the slot must be occupied). */
  keyAt(slot: number): BlockKey {
    return this.f64[slot * this.strideF64]! - 1;
  }

  isOccupied(slot: number): boolean {
    return this.f64[slot * this.strideF64] !== 0;
  }

  /**
   * Empties `slot`, shifting later records of the same probe run back so lookups stay correct.
   * A record from further along may land in `slot`: callers scanning the table re-check it.
   */
  removeAt(slot: number): void {
    const f64 = this.f64;
    const stride = this.strideF64;
    const mask = this.#mask;
    let hole = slot;
    let next = slot;
    for (;;) {
      next = (next + 1) & mask;
      const k = f64[next * stride]!;
      if (k === 0) break;
      const home = keyHome(k - 1, this.#shift);
      // The record at `next` may move into the hole unless its home lies cyclically in (hole, next].
      const stays = hole <= next ? hole < home && home <= next : hole < home || home <= next;
      if (stays) continue;
      // Plain loops: records are a few words, too short for copyWithin's call overhead.
      for (let w = 0; w < stride; w++) f64[hole * stride + w] = f64[next * stride + w]!;
      hole = next;
    }
    for (let w = 0; w < stride; w++) f64[hole * stride + w] = 0;
    this.#size--;
  }

  /** Drops every key. */
  clear(): void {
    this.f64.fill(0);
    this.#size = 0;
  }

  /**
   * Makes room for `keys` keys in all without growing again (a replica's KV pool, once known):
   * one rehash now instead of one per doubling as it fills.
   */
  reserve(keys: number): void {
    let slots = this.#mask + 1;
    while (slots < keys * 2) slots *= 2;
    if (slots > this.#mask + 1) this.#rehash(slots);
  }

  #grow(): void {
    this.#rehash((this.#mask + 1) * 2);
  }

  #rehash(slots: number): void {
    const old = this.f64;
    const stride = this.strideF64;
    const oldSlots = this.#mask + 1;
    this.#mask = slots - 1;
    this.#shift = homeShift(slots);
    const buffer = new ArrayBuffer(slots * stride * 8);
    const f64 = new Float64Array(buffer);
    if (stride === 2) {
      // Key and one payload word (the foreign-key map's and the overlay's records): no inner loop.
      const mask = this.#mask;
      for (let from = 0; from < oldSlots * 2; from += 2) {
        const k = old[from]!;
        if (k === 0) continue;
        let to = keyHome(k - 1, this.#shift) * 2;
        while (f64[to] !== 0) to = (to + 2) & (mask * 2 + 1);
        f64[to] = k;
        f64[to + 1] = old[from + 1]!;
      }
      this.f64 = f64;
      this.i32 = new Int32Array(buffer);
      return;
    }
    for (let s = 0; s < oldSlots; s++) {
      const k = old[s * stride]!;
      if (k === 0) continue;
      let slot = keyHome(k - 1, this.#shift);
      while (f64[slot * stride] !== 0) slot = (slot + 1) & this.#mask;
      for (let w = 0; w < stride; w++) f64[slot * stride + w] = old[s * stride + w]!;
    }
    this.f64 = f64;
    this.i32 = new Int32Array(buffer);
  }
}
