/**
 * Which llama.cpp sequence holds what, in the block pool's terms, and where an admitted request
 * runs. Pure bookkeeping over sequence indexes: the runtime does the physical work (erase, state
 * copy) that a placement asks for.
 *
 * Each sequence holds, from position 0, the full prompt blocks it computed (their block keys;
 * chained keys, so equal keys mean equal tokens and scope) and maybe more tokens after them. A
 * sequence is running (one request owns it) or idle (its KV stays, as a cache). A request
 * admitted with `cachedBlocks` of its prompt cached by the pool runs in:
 *   1. an idle sequence that holds those blocks: keep them, erase the rest;
 *   2. else the victim sequence, after a state copy from any sequence that holds them;
 * and with nothing cached, in the victim sequence, erased. The victim is the idle sequence that
 * loses least: none of the keys later admissions of the same step need, empty first, then the
 * least recently used. Keys the target held past what it keeps are lost; those no other sequence
 * holds must leave the pool's cache (the caller uncaches them).
 */
import type { BlockKey } from '../../../kv/blockKey.ts';

export interface Placement {
  /** The sequence the request runs in. */
  target: number;
  /** A sequence whose state is copied into the target first, or null. */
  source: number | null;
  /** Blocks of the request's prompt the target holds once placed (the cached prefix). */
  keepBlocks: number;
  /** Keys the target held that placing drops. */
  lost: BlockKey[];
}

export class SequenceMap {
  readonly #owner: (string | null)[];
  readonly #keys: BlockKey[][];
  readonly #usedAt: number[];
  readonly #seqOf = new Map<string, number>();
  #tick = 0;

  constructor(count: number) {
    if (!Number.isInteger(count) || count < 1) {
      throw new RangeError(`sequences must be an integer >= 1, got ${count}`);
    }
    this.#owner = Array.from({ length: count }, () => null);
    this.#keys = Array.from({ length: count }, () => []);
    this.#usedAt = Array.from({ length: count }, () => 0);
  }

  get size(): number {
    return this.#owner.length;
  }

  /** The sequence a running request owns. */
  seqOf(id: string): number | undefined {
    return this.#seqOf.get(id);
  }

  ownerOf(seq: number): string | null {
    return this.#owner[seq]!;
  }

  /** The block keys a sequence holds from position 0 (a copy). */
  keysOf(seq: number): BlockKey[] {
    return this.#keys[seq]!.slice();
  }

  /** True when some sequence holds `key`. */
  holds(key: BlockKey): boolean {
    return this.#keys.some((keys) => keys.includes(key));
  }

  /**
   * Where a request admitted with `cachedBlocks` of `keys` cached runs; `needed`: keys that
   * later admissions of the same step read from the cache. Throws when no sequence holds the
   * cached blocks (the pool claimed blocks no sequence has) or none is idle.
   */
  place(keys: readonly BlockKey[], cachedBlocks: number, needed: ReadonlySet<BlockKey>): Placement {
    if (cachedBlocks > 0) {
      let best = -1;
      for (let s = 0; s < this.size; s++) {
        if (this.#owner[s] !== null || this.#match(s, keys) < cachedBlocks) continue;
        if (best === -1 || this.#loses(s, cachedBlocks) < this.#loses(best, cachedBlocks)) best = s;
      }
      if (best !== -1) {
        return {
          target: best,
          source: null,
          keepBlocks: cachedBlocks,
          lost: this.#keys[best]!.slice(cachedBlocks),
        };
      }
      const source = this.#findHolder(keys, cachedBlocks);
      if (source === -1) {
        throw new Error(`no sequence holds the ${cachedBlocks} cached blocks of an admission`);
      }
      const target = this.#victim(needed, source);
      return { target, source, keepBlocks: cachedBlocks, lost: this.#keys[target]!.slice() };
    }
    const target = this.#victim(needed, -1);
    return { target, source: null, keepBlocks: 0, lost: this.#keys[target]!.slice() };
  }

  /** Records a placement done: the target holds the kept prefix and runs `id`. */
  assign(id: string, placement: Placement, keys: readonly BlockKey[]): void {
    const seq = placement.target;
    this.#owner[seq] = id;
    this.#keys[seq] = keys.slice(0, placement.keepBlocks);
    this.#usedAt[seq] = ++this.#tick;
    this.#seqOf.set(id, seq);
  }

  /** The blocks a running request's sequence holds now (they only grow while it runs). */
  setKeys(id: string, keys: readonly BlockKey[]): void {
    const seq = this.#seqOf.get(id);
    if (seq !== undefined) this.#keys[seq] = keys.slice();
  }

  /** The request no longer runs: its sequence turns idle, its KV kept as a cache. */
  release(id: string): void {
    const seq = this.#seqOf.get(id);
    if (seq === undefined) return;
    this.#seqOf.delete(id);
    this.#owner[seq] = null;
    this.#usedAt[seq] = ++this.#tick;
  }

  /** Leading keys sequence `s` shares with `keys`. */
  #match(s: number, keys: readonly BlockKey[]): number {
    const held = this.#keys[s]!;
    const n = Math.min(held.length, keys.length);
    let i = 0;
    while (i < n && held[i] === keys[i]) i++;
    return i;
  }

  /** Keys sequence `s` would drop keeping `keep` blocks. */
  #loses(s: number, keep: number): number {
    return Math.max(0, this.#keys[s]!.length - keep);
  }

  #findHolder(keys: readonly BlockKey[], blocks: number): number {
    for (let s = 0; s < this.size; s++) if (this.#match(s, keys) >= blocks) return s;
    return -1;
  }

  #victim(needed: ReadonlySet<BlockKey>, exclude: number): number {
    let best = -1;
    let bestRank: [number, number, number] | null = null;
    for (let s = 0; s < this.size; s++) {
      if (this.#owner[s] !== null || s === exclude) continue;
      const keys = this.#keys[s]!;
      const guards = keys.some((k) => needed.has(k)) ? 1 : 0;
      const rank: [number, number, number] = [guards, keys.length === 0 ? 0 : 1, this.#usedAt[s]!];
      if (bestRank === null || lessThan(rank, bestRank)) {
        best = s;
        bestRank = rank;
      }
    }
    if (best === -1) throw new Error('no idle llama.cpp sequence for an admission');
    return best;
  }
}

function lessThan(a: readonly number[], b: readonly number[]): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! < b[i]!;
  return false;
}
