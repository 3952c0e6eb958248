/**
 * The piece encoder's word cache: a piece's ids by its text, looked up by a range of the
 * section's text (`text`, `start`, `end`) so that a hit, the common case, creates no string: no
 * slice to allocate, no string hash to compute and store. Open addressing over typed arrays
 * (FNV-1a over the UTF-16 code units, linear probing); it starts over when full, as the Map it
 * replaces did at the same size.
 */

/** One id (most pieces) or several. */
export type CachedIds = number | number[];

const MIN_SLOTS = 1024;

export class WordCache {
  readonly #maxEntries: number;
  #mask: number;
  #keys: (string | undefined)[];
  #hashes: Int32Array;
  #values: (CachedIds | undefined)[];
  #size = 0;

  constructor(maxEntries: number) {
    this.#maxEntries = maxEntries;
    this.#mask = MIN_SLOTS - 1;
    this.#keys = new Array(MIN_SLOTS);
    this.#hashes = new Int32Array(MIN_SLOTS);
    this.#values = new Array(MIN_SLOTS);
  }

  get size(): number {
    return this.#size;
  }

  /** The ids of `text.slice(start, end)`, or undefined. */
  get(text: string, start: number, end: number): CachedIds | undefined {
    const h = hashRange(text, start, end);
    const keys = this.#keys;
    const hashes = this.#hashes;
    const mask = this.#mask;
    const length = end - start;
    for (let slot = h & mask; ; slot = (slot + 1) & mask) {
      const key = keys[slot];
      if (key === undefined) return undefined;
      if (hashes[slot] === h && key.length === length && sameRange(key, text, start)) {
        return this.#values[slot];
      }
    }
  }

  /** Remembers `ids` for `piece` (not already cached); starts over once full. */
  set(piece: string, ids: CachedIds): void {
    if (this.#size >= this.#maxEntries) this.clear();
    if ((this.#size + 1) * 2 > this.#mask + 1) this.#grow();
    this.#place(piece, hashRange(piece, 0, piece.length), ids);
    this.#size++;
  }

  clear(): void {
    this.#mask = MIN_SLOTS - 1;
    this.#keys = new Array(MIN_SLOTS);
    this.#hashes = new Int32Array(MIN_SLOTS);
    this.#values = new Array(MIN_SLOTS);
    this.#size = 0;
  }

  #place(key: string, h: number, ids: CachedIds): void {
    const mask = this.#mask;
    let slot = h & mask;
    while (this.#keys[slot] !== undefined) slot = (slot + 1) & mask;
    this.#keys[slot] = key;
    this.#hashes[slot] = h;
    this.#values[slot] = ids;
  }

  #grow(): void {
    const keys = this.#keys;
    const hashes = this.#hashes;
    const values = this.#values;
    const slots = (this.#mask + 1) * 2;
    this.#mask = slots - 1;
    this.#keys = new Array(slots);
    this.#hashes = new Int32Array(slots);
    this.#values = new Array(slots);
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i];
      if (key !== undefined) this.#place(key, hashes[i]!, values[i]!);
    }
  }
}

function hashRange(text: string, start: number, end: number): number {
  let h = 0x811c9dc5 | 0;
  for (let i = start; i < end; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h;
}

function sameRange(key: string, text: string, start: number): boolean {
  for (let i = 0; i < key.length; i++) {
    if (key.charCodeAt(i) !== text.charCodeAt(start + i)) return false;
  }
  return true;
}
