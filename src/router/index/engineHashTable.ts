/**
 * Engine block hash -> handle (a small integer its owner indexes typed arrays with), for
 * ForeignKeyMap. vLLM's hashes come off the wire as BigInts in [0, 2^64); a Map keyed on BigInts
 * hashes and compares each key in a call out of compiled code, about 0.3 µs a lookup on Node 20,
 * most of a foreign event's cost. So those hashes sit in an open-addressing table of their two
 * 32-bit words (written through a BigUint64Array, no BigInt made), one record of three words a
 * slot: low word, high word, handle + 1 (0: an empty slot). Linear probing, backward-shift
 * deletion (no tombstones), load factor at most 1/2.
 *
 * Any other hash (a number, a string, a BigInt outside that range) goes to a Map as before, so a
 * number and a BigInt of the same value stay two keys, as they are in a Map.
 */

/** An engine's block hash as decoded off the wire. */
export type EngineHash = bigint | number | string;

/** `get`'s answer for a hash not in the table. */
export const NO_HANDLE = -1;

const U64_MAX = 0xffff_ffff_ffff_ffffn;
const MIN_SLOTS = 1024;
/** Slots below which the table grows fourfold, not twofold. */
const QUADRUPLE_BELOW = 1 << 16;
/** Words per slot: low, high, handle + 1. */
const STRIDE = 3;

/** A u64 BigInt's two 32-bit words, read back through `halves` (no allocation). */
const word64 = new BigUint64Array(1);
const halves = new Int32Array(word64.buffer);

/** Whether `hash` goes in the table (a BigInt in [0, 2^64)), not in the Map. */
function isU64(hash: EngineHash): hash is bigint {
  return typeof hash === 'bigint' && hash >= 0n && hash <= U64_MAX;
}

export class EngineHashTable {
  #slots: Int32Array;
  #mask: number;
  #shift: number;
  #size = 0;
  /** Hashes that are not u64 BigInts. */
  #other = new Map<EngineHash, number>();

  constructor() {
    this.#slots = new Int32Array(MIN_SLOTS * STRIDE);
    this.#mask = MIN_SLOTS - 1;
    this.#shift = 32 - Math.log2(MIN_SLOTS);
  }

  /** Slots of the u64 table (twice the hashes it holds before it grows). */
  get slots(): number {
    return this.#mask + 1;
  }

  /** Hashes held. */
  get size(): number {
    return this.#size + this.#other.size;
  }

  /** Home slot of the words (lo, hi): both folded, then Fibonacci hashing for the top bits. */
  #home(lo: number, hi: number): number {
    return Math.imul(lo ^ Math.imul(hi ^ (hi >>> 15), 0x85ebca6b), 0x9e3779b1) >>> this.#shift;
  }

  /** The slot holding words (lo, hi), or the empty slot ending their probe run. */
  #probe(lo: number, hi: number): number {
    const slots = this.#slots;
    let slot = this.#home(lo, hi);
    for (;;) {
      const at = slot * STRIDE;
      if (slots[at + 2] === 0 || (slots[at] === lo && slots[at + 1] === hi)) return slot;
      slot = (slot + 1) & this.#mask;
    }
  }

  /** Handle of `hash`, or NO_HANDLE. */
  get(hash: EngineHash): number {
    if (!isU64(hash)) return this.#other.get(hash) ?? NO_HANDLE;
    word64[0] = hash;
    const slot = this.#probe(halves[0]!, halves[1]!);
    return this.#slots[slot * STRIDE + 2]! - 1;
  }

  /** Maps `hash`, which must not be held, to `handle` (>= 0). */
  add(hash: EngineHash, handle: number): void {
    if (!isU64(hash)) {
      this.#other.set(hash, handle);
      return;
    }
    if ((this.#size + 1) * 2 > this.#mask + 1) this.#grow();
    word64[0] = hash;
    const lo = halves[0]!;
    const hi = halves[1]!;
    const at = this.#probe(lo, hi) * STRIDE;
    const slots = this.#slots;
    slots[at] = lo;
    slots[at + 1] = hi;
    slots[at + 2] = handle + 1;
    this.#size++;
  }

  /**
   * Handle of `hash`; when it is not held, maps it to `handle` (>= 0) and answers NO_HANDLE. One
   * probe where a `get` then an `add` take two.
   */
  getOrAdd(hash: EngineHash, handle: number): number {
    if (!isU64(hash)) {
      const held = this.#other.get(hash);
      if (held !== undefined) return held;
      this.#other.set(hash, handle);
      return NO_HANDLE;
    }
    word64[0] = hash;
    const lo = halves[0]!;
    const hi = halves[1]!;
    let at = this.#probe(lo, hi) * STRIDE;
    if (this.#slots[at + 2] !== 0) return this.#slots[at + 2]! - 1;
    if ((this.#size + 1) * 2 > this.#mask + 1) {
      this.#grow();
      at = this.#probe(lo, hi) * STRIDE;
    }
    const slots = this.#slots;
    slots[at] = lo;
    slots[at + 1] = hi;
    slots[at + 2] = handle + 1;
    this.#size++;
    return NO_HANDLE;
  }

  /** Handle of `hash`, which is forgotten, or NO_HANDLE when not held. One probe. */
  take(hash: EngineHash): number {
    if (!isU64(hash)) {
      const held = this.#other.get(hash);
      if (held === undefined) return NO_HANDLE;
      this.#other.delete(hash);
      return held;
    }
    word64[0] = hash;
    const slot = this.#probe(halves[0]!, halves[1]!);
    const handle = this.#slots[slot * STRIDE + 2]! - 1;
    if (handle !== NO_HANDLE) this.#removeAt(slot);
    return handle;
  }

  /** Forgets `hash` (a no-op when not held). */
  delete(hash: EngineHash): void {
    if (!isU64(hash)) {
      this.#other.delete(hash);
      return;
    }
    word64[0] = hash;
    const slot = this.#probe(halves[0]!, halves[1]!);
    if (this.#slots[slot * STRIDE + 2] !== 0) this.#removeAt(slot);
  }

  /** Drops every hash. */
  clear(): void {
    if (this.#size > 0) this.#slots.fill(0);
    this.#size = 0;
    this.#other.clear();
  }

  /** Empties `slot`, shifting later records of its probe run back so lookups stay correct. */
  #removeAt(slot: number): void {
    const slots = this.#slots;
    const mask = this.#mask;
    let hole = slot;
    for (let next = (slot + 1) & mask; slots[next * STRIDE + 2] !== 0; next = (next + 1) & mask) {
      const at = next * STRIDE;
      const home = this.#home(slots[at]!, slots[at + 1]!);
      // The record at `next` may move into the hole unless its home lies cyclically in (hole, next].
      const stays = hole <= next ? hole < home && home <= next : hole < home || home <= next;
      if (stays) continue;
      const to = hole * STRIDE;
      slots[to] = slots[at]!;
      slots[to + 1] = slots[at + 1]!;
      slots[to + 2] = slots[at + 2]!;
      hole = next;
    }
    const to = hole * STRIDE;
    slots[to] = 0;
    slots[to + 1] = 0;
    slots[to + 2] = 0;
    this.#size--;
  }

  /** Makes room for `hashes` u64 hashes in all without growing again (see SlotTable.reserve). */
  reserve(hashes: number): void {
    let count = this.#mask + 1;
    while (count < hashes * 2) count *= 2;
    if (count > this.#mask + 1) this.#rehash(count);
  }

  #grow(): void {
    // Four times while small: a replica's map fills from empty to its KV pool's blocks, and each
    // growth is a fresh allocation and a pass over the table (at most 3/4 of 768 KiB idle).
    this.#rehash((this.#mask + 1) * (this.#mask + 1 < QUADRUPLE_BELOW ? 4 : 2));
  }

  #rehash(count: number): void {
    const old = this.#slots;
    this.#mask = count - 1;
    this.#shift = 32 - Math.log2(count);
    const slots = new Int32Array(count * STRIDE);
    for (let from = 0; from < old.length; from += STRIDE) {
      if (old[from + 2] === 0) continue;
      const lo = old[from]!;
      const hi = old[from + 1]!;
      let slot = this.#home(lo, hi);
      while (slots[slot * STRIDE + 2] !== 0) slot = (slot + 1) & this.#mask;
      const to = slot * STRIDE;
      slots[to] = lo;
      slots[to + 1] = hi;
      slots[to + 2] = old[from + 2]!;
    }
    this.#slots = slots;
  }
}
