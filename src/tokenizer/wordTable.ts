/**
 * The tokenizer's word cache: a piece's ids by the piece's text, looked up by a range of the
 * section's text, so a hit cuts no string out of it. A `Map<string, ids>` needs a new string per
 * piece and hashes and compares it there; in a steady-state chat (the system prompt cached as a
 * section, a 2,000-token message of known words) that lookup was the largest cost of
 * tokenizing. Open addressing with linear probing; each entry keeps its 32-bit hash (a probe
 * compares characters only on a hash match, growth rehashes without reading them), its UTF-16
 * code units in one pool and its ids in another. Entries are never removed one by one: at
 * `maxEntries` the table starts over, as the Map did.
 */

const MIN_SLOTS = 1024;
const MIN_ENTRIES = 512;

export class WordTable {
  readonly #maxEntries: number;
  /** Entry index + 1 per slot; 0 is empty. */
  #slots = new Int32Array(MIN_SLOTS);
  #mask = MIN_SLOTS - 1;
  #size = 0;
  #hashes = new Int32Array(MIN_ENTRIES);
  /** Entry e's code units are chars[charStarts[e], charStarts[e + 1]). */
  #charStarts = new Int32Array(MIN_ENTRIES + 1);
  #chars = new Uint16Array(MIN_ENTRIES * 8);
  /** Entry e's ids are ids[idStarts[e], idStarts[e + 1]). */
  #idStarts = new Int32Array(MIN_ENTRIES + 1);
  #ids = new Int32Array(MIN_ENTRIES * 2);

  constructor(maxEntries: number) {
    if (!(maxEntries >= 1)) throw new RangeError(`maxEntries must be >= 1, got ${maxEntries}`);
    this.#maxEntries = maxEntries;
  }

  get size(): number {
    return this.#size;
  }

  /** The entry of text[start, end), or -1. */
  find(text: string, start: number, end: number): number {
    const hash = hashRange(text, start, end);
    const slots = this.#slots;
    const hashes = this.#hashes;
    const mask = this.#mask;
    for (let slot = hash & mask; ; slot = (slot + 1) & mask) {
      const held = slots[slot]!;
      if (held === 0) return -1;
      const entry = held - 1;
      if (hashes[entry] === hash && this.#equals(entry, text, start, end)) return entry;
    }
  }

  /** Appends entry `entry`'s ids to `out`. */
  appendIds(entry: number, out: number[]): void {
    const ids = this.#ids;
    const to = this.#idStarts[entry + 1]!;
    for (let i = this.#idStarts[entry]!; i < to; i++) out.push(ids[i]!);
  }

  /**
   * Adds text[start, end) (which must be absent) with the ids ids[from, to); when the table
   * holds `maxEntries` already, it is emptied first.
   */
  add(text: string, start: number, end: number, ids: readonly number[], from: number, to: number) {
    if (this.#size >= this.#maxEntries) this.clear();
    const entry = this.#size;
    if (entry >= this.#hashes.length) this.#growEntries();
    if ((entry + 1) * 2 > this.#slots.length) this.#rehash(this.#slots.length * 2);
    const charFrom = this.#charStarts[entry]!;
    const charTo = charFrom + (end - start);
    if (charTo > this.#chars.length) this.#chars = grown(this.#chars, charTo);
    const chars = this.#chars;
    for (let i = start; i < end; i++) chars[charFrom + i - start] = text.charCodeAt(i);
    this.#charStarts[entry + 1] = charTo;
    const idFrom = this.#idStarts[entry]!;
    const idTo = idFrom + (to - from);
    if (idTo > this.#ids.length) this.#ids = grown(this.#ids, idTo);
    const pool = this.#ids;
    for (let i = from; i < to; i++) pool[idFrom + i - from] = ids[i]!;
    this.#idStarts[entry + 1] = idTo;
    const hash = hashRange(text, start, end);
    this.#hashes[entry] = hash;
    this.#place(hash, entry);
    this.#size = entry + 1;
  }

  /** Drops every entry (keeping the arrays for the next ones). */
  clear(): void {
    this.#slots.fill(0);
    this.#size = 0;
  }

  #equals(entry: number, text: string, start: number, end: number): boolean {
    const from = this.#charStarts[entry]!;
    if (this.#charStarts[entry + 1]! - from !== end - start) return false;
    const chars = this.#chars;
    for (let i = start; i < end; i++) {
      if (chars[from + i - start] !== text.charCodeAt(i)) return false;
    }
    return true;
  }

  #place(hash: number, entry: number): void {
    const slots = this.#slots;
    const mask = this.#mask;
    let slot = hash & mask;
    while (slots[slot] !== 0) slot = (slot + 1) & mask;
    slots[slot] = entry + 1;
  }

  #rehash(slotCount: number): void {
    this.#slots = new Int32Array(slotCount);
    this.#mask = slotCount - 1;
    for (let e = 0; e < this.#size; e++) this.#place(this.#hashes[e]!, e);
  }

  #growEntries(): void {
    const entries = this.#hashes.length * 2;
    this.#hashes = grown(this.#hashes, entries);
    this.#charStarts = grown(this.#charStarts, entries + 1);
    this.#idStarts = grown(this.#idStarts, entries + 1);
  }
}

/** A copy of `array` with room for at least `length` elements (doubling). */
function grown<T extends Int32Array | Uint16Array>(array: T, length: number): T {
  let size = array.length * 2;
  while (size < length) size *= 2;
  const next = new (array.constructor as new (n: number) => T)(size);
  next.set(array);
  return next;
}

/** FNV-1a over the UTF-16 code units of text[start, end), then mixed so its low bits spread. */
export function hashRange(text: string, start: number, end: number): number {
  let h = 0x811c9dc5;
  for (let i = start; i < end; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  h ^= h >>> 16;
  h = Math.imul(h, 0x7feb352d);
  h ^= h >>> 15;
  return h;
}
