/**
 * llama-server's slot choice on token ids, written from tools/server/server-context.cpp
 * (`get_available_slot`, `--cache-ram 0`): among idle slots holding tokens, the largest common
 * prefix as a fraction of the prompt, when over the similarity threshold; else the least
 * recently used idle slot. The reused prefix is capped at the prompt less one token. The fake
 * llama-server serves with it, and the router's slot model is checked against it.
 */
export interface TokenSlot {
  tokens: number[];
  lastUsed: number;
  busy: boolean;
}

export class TokenSlots {
  readonly slots: TokenSlot[];
  readonly similarity: number;
  #tick = 0;

  constructor(n: number, similarity = 0.1) {
    this.slots = Array.from({ length: n }, () => ({ tokens: [], lastUsed: -1, busy: false }));
    this.similarity = similarity;
  }

  /** Takes a slot for `prompt`: its index and the tokens reused; null when none is idle. */
  take(prompt: readonly number[]): { slot: number; cached: number } | null {
    let best = -1;
    let bestSim = 0;
    for (let i = 0; i < this.slots.length; i++) {
      const s = this.slots[i]!;
      if (s.busy || s.tokens.length === 0) continue;
      const sim = lcp(s.tokens, prompt) / prompt.length;
      if (sim > bestSim && sim > this.similarity) {
        bestSim = sim;
        best = i;
      }
    }
    if (best < 0) {
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
    const cached = Math.min(lcp(s.tokens, prompt), Math.max(0, prompt.length - 1));
    s.tokens = [...prompt];
    s.busy = true;
    s.lastUsed = this.#tick++;
    return { slot: best, cached };
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
