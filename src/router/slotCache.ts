/**
 * A replica whose cache is a set of slots, as llama.cpp's llama-server keeps it: `n_slots`
 * prompt caches, one prompt each, plus an optional host prompt cache (`--cache-ram`). The
 * router predicts a hit there as the engine will serve it, not from an unbounded block pool.
 *
 * The slot a request gets (server-context.cpp, `get_available_slot`): among idle slots holding
 * a prompt, the one whose longest common prefix with the request is the largest fraction of
 * the request (`lcp / prompt`), when that fraction is over `slot_prompt_similarity` (0.1);
 * else the idle slot used least recently (an empty slot first). When the slot falls back to
 * LRU, or would keep under half its prompt, its prompt goes to the host cache and the host
 * cache's best match is loaded into it. With no idle slot the request waits (deferred) and is
 * placed when a slot frees. The hit is the chosen slot's (or the loaded host entry's) common
 * prefix, in whole blocks, at most the prompt less one token (the engine evaluates the last).
 *
 * Pure: no clock (a route counter orders use), keys are the router's block keys.
 */
import type { BlockKey } from '../kv/blockKey.ts';

/** llama-server's `--slot-prompt-similarity` default. */
export const DEFAULT_SLOT_SIMILARITY = 0.1;

export interface SlotCacheOptions {
  slots: number;
  /** Fraction of the prompt a slot's prefix must exceed to be chosen by similarity. */
  similarity?: number;
  /** Host prompt cache bound, in blocks; 0 or absent: none (`--cache-ram 0`). */
  hostBlocks?: number;
}

interface Slot {
  keys: readonly BlockKey[];
  lastUsed: number;
  /** The request holding it, or null when idle. */
  busy: string | null;
}

interface Waiting {
  id: string;
  keys: readonly BlockKey[];
  promptTokens: number;
  blockSize: number;
}

interface Choice {
  slot: number;
  blocks: number;
  /** The host entry loaded into the slot, if any. */
  host: number;
  /** The slot's prompt goes to the host cache (LRU fallback, or it keeps under half). */
  save: boolean;
}

export class SlotCache {
  readonly #slots: Slot[];
  readonly #similarity: number;
  readonly #hostBlocks: number;
  /** Host entries, least recently used first, with their sizes in blocks. */
  readonly #host: { keys: readonly BlockKey[]; blocks: number }[] = [];
  #hostUsed = 0;
  readonly #waiting: Waiting[] = [];
  #tick = 0;

  constructor(options: SlotCacheOptions) {
    if (!Number.isInteger(options.slots) || options.slots < 1) {
      throw new RangeError(`slots must be a whole number >= 1, got ${options.slots}`);
    }
    this.#slots = Array.from({ length: options.slots }, () => ({
      keys: [],
      lastUsed: -1,
      busy: null,
    }));
    this.#similarity = options.similarity ?? DEFAULT_SLOT_SIMILARITY;
    this.#hostBlocks = options.hostBlocks ?? 0;
  }

  get slots(): number {
    return this.#slots.length;
  }

  /** The blocks each slot holds (a copy), for views and tests. */
  held(): BlockKey[][] {
    return this.#slots.map((s) => [...s.keys]);
  }

  /** Blocks the engine would serve from cache for this prompt now; 0 when it would wait. */
  predict(keys: readonly BlockKey[], promptTokens: number, blockSize: number): number {
    const choice = this.#choose(keys, promptTokens, blockSize);
    return choice === null ? 0 : choice.blocks;
  }

  /** The request went there: its slot (or its place in the queue) is taken. */
  assign(id: string, keys: readonly BlockKey[], promptTokens: number, blockSize: number): void {
    this.release(id);
    const choice = this.#choose(keys, promptTokens, blockSize);
    if (choice === null) this.#waiting.push({ id, keys, promptTokens, blockSize });
    else this.#take(choice, id, keys);
  }

  /** The request ended (or was retried elsewhere): its slot is idle, a waiting one may take it. */
  release(id: string): void {
    const w = this.#waiting.findIndex((x) => x.id === id);
    if (w >= 0) {
      this.#waiting.splice(w, 1);
      return;
    }
    const slot = this.#slots.find((s) => s.busy === id);
    if (!slot) return;
    slot.busy = null;
    // Deferred tasks go back in order once a slot frees (`pop_deferred_task`).
    while (this.#waiting.length > 0) {
      const next = this.#waiting[0]!;
      const choice = this.#choose(next.keys, next.promptTokens, next.blockSize);
      if (choice === null) break;
      this.#waiting.shift();
      this.#take(choice, next.id, next.keys);
    }
  }

  /** The engine restarted or the replica left: every slot and the host cache are empty. */
  clear(): void {
    for (const s of this.#slots) {
      s.keys = [];
      s.lastUsed = -1;
      s.busy = null;
    }
    this.#host.length = 0;
    this.#hostUsed = 0;
    this.#waiting.length = 0;
  }

  #choose(keys: readonly BlockKey[], promptTokens: number, blockSize: number): Choice | null {
    const cap = promptTokens > 0 ? Math.floor((promptTokens - 1) / blockSize) : 0;
    let best = -1;
    let bestSim = 0;
    let bestLcp = 0;
    for (let i = 0; i < this.#slots.length; i++) {
      const s = this.#slots[i]!;
      if (s.busy !== null || s.keys.length === 0) continue;
      const lcp = commonPrefix(s.keys, keys);
      const sim = promptTokens > 0 ? (lcp * blockSize) / promptTokens : 0;
      if (sim > bestSim && sim > this.#similarity) {
        best = i;
        bestSim = sim;
        bestLcp = lcp;
      }
    }
    let updateCache = false;
    if (best >= 0) {
      const held = this.#slots[best]!.keys.length;
      updateCache = held > 0 && bestLcp / held < 0.5;
    } else {
      let oldest = Number.POSITIVE_INFINITY;
      for (let i = 0; i < this.#slots.length; i++) {
        const s = this.#slots[i]!;
        if (s.busy === null && s.lastUsed < oldest) {
          oldest = s.lastUsed;
          best = i;
        }
      }
      if (best < 0) return null;
      bestLcp = commonPrefix(this.#slots[best]!.keys, keys);
      updateCache = true;
    }
    let host = -1;
    if (updateCache && this.#hostBlocks > 0) {
      for (let h = 0; h < this.#host.length; h++) {
        const lcp = commonPrefix(this.#host[h]!.keys, keys);
        if (lcp > bestLcp) {
          bestLcp = lcp;
          host = h;
        }
      }
    }
    return { slot: best, blocks: Math.min(bestLcp, cap), host, save: updateCache };
  }

  #take(choice: Choice, id: string, keys: readonly BlockKey[]): void {
    const slot = this.#slots[choice.slot]!;
    if (choice.host >= 0) {
      // The loaded entry moves out of the host cache into the slot.
      const [loaded] = this.#host.splice(choice.host, 1);
      this.#hostUsed -= loaded!.blocks;
    }
    if (choice.save && this.#hostBlocks > 0 && slot.keys.length > 0) this.#save(slot.keys);
    slot.keys = keys;
    slot.busy = id;
    slot.lastUsed = this.#tick++;
  }

  #save(keys: readonly BlockKey[]): void {
    const blocks = keys.length;
    if (blocks > this.#hostBlocks) return;
    this.#host.push({ keys, blocks });
    this.#hostUsed += blocks;
    while (this.#hostUsed > this.#hostBlocks) this.#hostUsed -= this.#host.shift()!.blocks;
  }
}

function commonPrefix(a: readonly BlockKey[], b: readonly BlockKey[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
