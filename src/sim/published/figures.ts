/**
 * A replayed run's figures as the publication counts them. Token/s is input plus output tokens
 * over the time from the first arrival to the last completion (SGLang's bench_serving "total
 * token throughput"). The hit rate, by `HitCount`:
 * - `cached`: cached prompt tokens over prompt tokens (vLLM's prefix cache hit rate);
 * - `sglang-log`: as SGLang's scheduler logs its "cache hit rate" (`log_prefill_stats`,
 *   python/sglang/srt/managers/scheduler.py): over every prefill batch, the matched prefix of
 *   each request in it over that prefix plus the tokens it extends. A prompt prefilled in
 *   several chunks enters one batch per chunk, its earlier chunks as that batch's matched prefix
 *   (`PrefillAdder.add_inflight_req`, schedule_policy.py), so they count as hits, and count
 *   again in the denominator.
 */
export interface ReplayFigures {
  requests: number;
  hitRate: number;
  tokensPerS: number;
  durationS: number;
}

export type HitCount = 'cached' | 'sglang-log';

/** Folds request records one at a time; `outputTokens` per completed request. */
export class ReplayTally {
  #requests = 0;
  #promptTokens = 0;
  /** The hit rate's numerator and denominator, as `hitCount` counts them. */
  #hitTokens = 0;
  #hitBaseTokens = 0;
  #firstArrivalMs = Number.POSITIVE_INFINITY;
  #lastEndMs = 0;
  readonly #outputTokens: number;
  readonly #hitCount: HitCount;

  constructor(outputTokens: number, hitCount: HitCount = 'cached') {
    this.#outputTokens = outputTokens;
    this.#hitCount = hitCount;
  }

  add(r: {
    arrivalMs: number;
    promptTokens: number;
    cachedTokens: number | null;
    resumedPrefixTokens?: number;
    endMs: number | null;
  }): void {
    if (r.endMs === null) return;
    this.#requests++;
    this.#promptTokens += r.promptTokens;
    const resumed = this.#hitCount === 'sglang-log' ? (r.resumedPrefixTokens ?? 0) : 0;
    this.#hitTokens += (r.cachedTokens ?? 0) + resumed;
    this.#hitBaseTokens += r.promptTokens + resumed;
    this.#firstArrivalMs = Math.min(this.#firstArrivalMs, r.arrivalMs);
    this.#lastEndMs = Math.max(this.#lastEndMs, r.endMs);
  }

  figures(): ReplayFigures {
    const durationS = Math.max(0, this.#lastEndMs - this.#firstArrivalMs) / 1000;
    const tokens = this.#promptTokens + this.#requests * this.#outputTokens;
    return {
      requests: this.#requests,
      hitRate: this.#hitBaseTokens === 0 ? 0 : this.#hitTokens / this.#hitBaseTokens,
      tokensPerS: durationS === 0 ? 0 : tokens / durationS,
      durationS,
    };
  }
}
