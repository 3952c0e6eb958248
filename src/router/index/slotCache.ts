/**
 * A replica whose cache is a set of slots, as llama.cpp's llama-server keeps it: `n_slots`
 * prompt caches, one prompt each, plus an optional host prompt cache (`--cache-ram`). The
 * router predicts a hit there as the engine will serve it, not from an unbounded block pool.
 *
 * The slot a request gets (server-context.cpp, `get_available_slot`): among idle slots holding
 * a prompt, the one whose longest common prefix with the request is the largest fraction of
 * the request (`lcp / prompt`), when that fraction is over `slot_prompt_similarity` (0.1);
 * else the idle slot used least recently (an empty slot first). With no idle slot the request
 * waits (deferred) and is placed when a slot frees. The hit is the chosen slot's (or the loaded
 * host entry's) common prefix, in whole blocks, at most the prompt less one token (the engine
 * evaluates the last).
 *
 * The host prompt cache, as upstream commit 82bb485 keeps it (tools/server/server-task.cpp,
 * `server_prompt_cache`; its bound `--cache-ram` MiB, here in blocks): whole prompt states,
 * oldest first. When the slot falls back to LRU, or would keep under half its prompt, its
 * prompt is saved (`alloc`: not when an entry already holds it whole or it alone passes the
 * bound; entries it holds whole are dropped; the oldest go until it fits), and the entry that
 * keeps a larger share of both itself and the request than the slot does (`load`: `f_keep` and
 * `f_sim`; entries that would keep under a quarter of themselves skipped) moves into the slot.
 * With `--cache-idle-slots` (upstream's default when the cache is on), every idle slot is saved
 * once a task is launched, and with a unified KV cache (`-np` left to auto) also cleared: the
 * host cache then holds every prompt not in a busy slot.
 *
 * Pure: no clock (a route counter orders use), keys are the router's block keys.
 */
import type { BlockKey } from '../../kv/blockKey.ts';

/** llama-server's `--slot-prompt-similarity` default. */
export const DEFAULT_SLOT_SIMILARITY = 0.1;

export interface SlotCacheOptions {
  slots: number;
  /** Fraction of the prompt a slot's prefix must exceed to be chosen by similarity. */
  similarity?: number;
  /** Host prompt cache bound, in blocks; 0 or absent: none (`--cache-ram 0`). */
  hostBlocks?: number;
  /** `--cache-idle-slots` (upstream's default, on): idle slots are saved at each launch. */
  saveIdleSlots?: boolean;
  /** A unified KV cache (llama-server with `-np` left to auto): idle slots are cleared once saved. */
  unifiedKv?: boolean;
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

interface HostEntry {
  keys: readonly BlockKey[];
}

interface Choice {
  slot: number;
  blocks: number;
  /** The host cache once the choice is taken (the slot's prompt saved, an entry loaded). */
  host: HostEntry[] | null;
}

/** llama-server skips host entries that would keep less than this of themselves (`load`). */
const MIN_KEEP = 0.25;

export class SlotCache {
  readonly #slots: Slot[];
  readonly #similarity: number;
  readonly #hostBlocks: number;
  readonly #saveIdle: boolean;
  readonly #unified: boolean;
  /** Host entries, least recently stored first. */
  #host: HostEntry[] = [];
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
    this.#saveIdle = this.#hostBlocks > 0 && (options.saveIdleSlots ?? false);
    this.#unified = this.#saveIdle && (options.unifiedKv ?? false);
  }

  get slots(): number {
    return this.#slots.length;
  }

  /** The blocks each slot holds (a copy), for views and tests. */
  held(): BlockKey[][] {
    return this.#slots.map((s) => [...s.keys]);
  }

  /** The blocks each host entry holds, oldest first (a copy). */
  hostEntries(): BlockKey[][] {
    return this.#host.map((e) => [...e.keys]);
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
    this.#host = [];
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
    if (!updateCache || this.#hostBlocks <= 0) {
      return { slot: best, blocks: Math.min(bestLcp, cap), host: null };
    }
    // The slot's prompt goes to the host cache, then the best entry comes out of it.
    const slotKeys = this.#slots[best]!.keys;
    const host = this.#saved(this.#host, slotKeys) ?? [...this.#host];
    let keepBest = slotKeys.length > 0 ? bestLcp / slotKeys.length : -1;
    let simBest = promptTokens > 0 ? (bestLcp * blockSize) / promptTokens : 0;
    let found = -1;
    for (let h = 0; h < host.length; h++) {
      const e = host[h]!;
      const lcp = commonPrefix(e.keys, keys);
      const keep = lcp / e.keys.length;
      const sim = promptTokens > 0 ? (lcp * blockSize) / promptTokens : 0;
      if (keep < MIN_KEEP) continue;
      if (keepBest < keep && simBest < sim) {
        keepBest = keep;
        simBest = sim;
        found = h;
        bestLcp = lcp;
      }
    }
    if (found >= 0) host.splice(found, 1);
    return { slot: best, blocks: Math.min(bestLcp, cap), host: this.#bounded(host) };
  }

  #take(choice: Choice, id: string, keys: readonly BlockKey[]): void {
    const slot = this.#slots[choice.slot]!;
    if (choice.host !== null) this.#host = choice.host;
    slot.keys = keys;
    slot.busy = id;
    slot.lastUsed = this.#tick++;
    if (!this.#saveIdle) return;
    // `--cache-idle-slots`: once a task is launched, every idle slot is saved (and with a
    // unified KV cache, cleared).
    for (const idle of this.#slots) {
      if (idle.busy !== null) continue;
      const saved = this.#saved(this.#host, idle.keys);
      if (saved !== null) this.#host = this.#bounded(saved);
      if (this.#unified) idle.keys = [];
    }
  }

  /**
   * `server_prompt_cache::alloc` on a copy of `host`: null when nothing is stored (an empty
   * prompt, one an entry already holds whole, one past the bound alone).
   */
  #saved(host: readonly HostEntry[], keys: readonly BlockKey[]): HostEntry[] | null {
    if (keys.length === 0 || keys.length > this.#hostBlocks) return null;
    if (host.some((e) => commonPrefix(e.keys, keys) === keys.length)) return null;
    // Entries the prompt holds whole are obsolete; the oldest go until it fits.
    const out = host.filter((e) => commonPrefix(e.keys, keys) !== e.keys.length);
    let used = out.reduce((n, e) => n + e.keys.length, 0);
    while (out.length > 0 && used + keys.length > this.#hostBlocks)
      used -= out.shift()!.keys.length;
    out.push({ keys });
    return out;
  }

  /** `server_prompt_cache::update`: the oldest go while over the bound. */
  #bounded(host: HostEntry[]): HostEntry[] {
    let used = host.reduce((n, e) => n + e.keys.length, 0);
    while (host.length > 0 && used > this.#hostBlocks) used -= host.shift()!.keys.length;
    return host;
  }
}

function commonPrefix(a: readonly BlockKey[], b: readonly BlockKey[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
