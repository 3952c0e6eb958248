/**
 * llama-server's slot choice on token ids, written from tools/server/server-context.cpp
 * (`get_available_slot`): among idle slots holding tokens, the largest common prefix as a
 * fraction of the prompt, when over the similarity threshold; else the least recently used idle
 * slot. The reused prefix is capped at the prompt less one token. The fake llama-server serves
 * with it, and the router's slot model is checked against it.
 *
 * With a host prompt cache (`--cache-ram` > 0; its bound here in tokens, `hostTokens`), as
 * upstream commit 82bb485 keeps it (tools/server/server-task.cpp, `server_prompt_cache`):
 * - when the chosen slot fell back to LRU or keeps under half its prompt, the slot's prompt is
 *   saved (`alloc`: skipped when an entry already holds it whole, or it alone passes the bound;
 *   entries it holds whole are dropped; the oldest go until it fits) and the entry that keeps
 *   more of both itself and the request than the slot does (`load`: `f_keep` and `f_sim` both
 *   larger, entries keeping under a quarter skipped) moves into the slot;
 * - `--cache-idle-slots` (on by default): once a task is launched, every idle slot is saved, and
 *   with a unified KV cache (`-np` left to auto) cleared.
 */
export interface TokenSlot {
  tokens: number[];
  lastUsed: number;
  busy: boolean;
}

export interface HostCacheOptions {
  /** The host cache's bound in tokens (`--cache-ram` over the state size of a token). */
  hostTokens: number;
  /** `--cache-idle-slots` (default on). */
  saveIdleSlots?: boolean;
  /** A unified KV cache: idle slots are cleared once saved. */
  unifiedKv?: boolean;
}

export class TokenSlots {
  readonly slots: TokenSlot[];
  readonly similarity: number;
  /** Host entries, oldest first. */
  readonly host: number[][] = [];
  readonly #host: HostCacheOptions | null;
  #tick = 0;

  constructor(n: number, similarity = 0.1, host: HostCacheOptions | null = null) {
    this.slots = Array.from({ length: n }, () => ({ tokens: [], lastUsed: -1, busy: false }));
    this.similarity = similarity;
    this.#host = host !== null && host.hostTokens > 0 ? host : null;
  }

  /** Takes a slot for `prompt`: its index and the tokens reused; null when none is idle. */
  take(prompt: readonly number[]): { slot: number; cached: number } | null {
    let best = -1;
    let bestSim = 0;
    let updateCache = false;
    for (let i = 0; i < this.slots.length; i++) {
      const s = this.slots[i]!;
      if (s.busy || s.tokens.length === 0) continue;
      const sim = lcp(s.tokens, prompt) / prompt.length;
      if (sim > bestSim && sim > this.similarity) {
        bestSim = sim;
        best = i;
      }
    }
    if (best >= 0) {
      const s = this.slots[best]!;
      updateCache = (bestSim * prompt.length) / s.tokens.length < 0.5;
    } else {
      updateCache = true;
      let oldest = Number.POSITIVE_INFINITY;
      for (let i = 0; i < this.slots.length; i++) {
        const s = this.slots[i]!;
        if (!s.busy && s.lastUsed < oldest) {
          oldest = s.lastUsed;
          best = i;
        }
      }
    }
    if (best < 0) return null;
    const s = this.slots[best]!;
    if (updateCache && this.#host !== null) {
      this.#save(s.tokens);
      this.#load(s, prompt);
      this.#update();
    }
    const cached = Math.min(lcp(s.tokens, prompt), Math.max(0, prompt.length - 1));
    s.tokens = [...prompt];
    s.busy = true;
    s.lastUsed = this.#tick++;
    if (this.#host !== null && (this.#host.saveIdleSlots ?? true)) {
      for (const idle of this.slots) {
        if (idle.busy) continue;
        if (this.#save(idle.tokens)) this.#update();
        if (this.#host.unifiedKv === true) idle.tokens = [];
      }
    }
    return { slot: best, cached };
  }

  #hostUsed(): number {
    return this.host.reduce((n, e) => n + e.length, 0);
  }

  /** `server_prompt_cache::alloc`: whether the prompt was stored. */
  #save(tokens: readonly number[]): boolean {
    const limit = this.#host!.hostTokens;
    if (tokens.length === 0) return false;
    if (this.host.some((e) => lcp(e, tokens) === tokens.length)) return false;
    if (tokens.length > limit) return false;
    for (let i = this.host.length - 1; i >= 0; i--) {
      if (lcp(this.host[i]!, tokens) === this.host[i]!.length) this.host.splice(i, 1);
    }
    while (this.host.length > 0 && this.#hostUsed() + tokens.length > limit) this.host.shift();
    this.host.push([...tokens]);
    return true;
  }

  /** `server_prompt_cache::load`: a better entry moves into the slot. */
  #load(slot: TokenSlot, prompt: readonly number[]): void {
    const base = lcp(slot.tokens, prompt);
    let keepBest = slot.tokens.length > 0 ? base / slot.tokens.length : -1;
    let simBest = base / prompt.length;
    let found = -1;
    for (let i = 0; i < this.host.length; i++) {
      const e = this.host[i]!;
      const cur = lcp(e, prompt);
      const keep = cur / e.length;
      const sim = cur / prompt.length;
      if (keep < 0.25) continue;
      if (keepBest < keep && simBest < sim) {
        keepBest = keep;
        simBest = sim;
        found = i;
      }
    }
    if (found >= 0) slot.tokens = this.host.splice(found, 1)[0]!;
  }

  /** `server_prompt_cache::update`: the oldest go while over the bound. */
  #update(): void {
    while (this.host.length > 0 && this.#hostUsed() > this.#host!.hostTokens) this.host.shift();
  }

  /** The slot's request ended; `generated` tokens follow the prompt in its cache. */
  release(slot: number, generated: readonly number[] = []): void {
    const s = this.slots[slot]!;
    s.busy = false;
    s.tokens.push(...generated);
  }

  get busy(): number {
    return this.slots.filter((s) => s.busy).length;
  }
}

export function lcp(a: readonly number[], b: readonly number[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}
