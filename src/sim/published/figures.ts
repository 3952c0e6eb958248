/**
 * A replayed run's figures as the publication counts them: the hit rate is cached prompt tokens
 * over prompt tokens; token/s is input plus output tokens over the time from the first arrival to
 * the last completion (SGLang's bench_serving "total token throughput").
 */
export interface ReplayFigures {
  requests: number;
  hitRate: number;
  tokensPerS: number;
  durationS: number;
}

/** Folds request records one at a time; `outputTokens` per completed request. */
export class ReplayTally {
  #requests = 0;
  #promptTokens = 0;
  #cachedTokens = 0;
  #firstArrivalMs = Number.POSITIVE_INFINITY;
  #lastEndMs = 0;
  readonly #outputTokens: number;

  constructor(outputTokens: number) {
    this.#outputTokens = outputTokens;
  }

  add(r: {
    arrivalMs: number;
    promptTokens: number;
    cachedTokens: number | null;
    endMs: number | null;
  }): void {
    if (r.endMs === null) return;
    this.#requests++;
    this.#promptTokens += r.promptTokens;
    this.#cachedTokens += r.cachedTokens ?? 0;
    this.#firstArrivalMs = Math.min(this.#firstArrivalMs, r.arrivalMs);
    this.#lastEndMs = Math.max(this.#lastEndMs, r.endMs);
  }

  figures(): ReplayFigures {
    const durationS = Math.max(0, this.#lastEndMs - this.#firstArrivalMs) / 1000;
    const tokens = this.#promptTokens + this.#requests * this.#outputTokens;
    return {
      requests: this.#requests,
      hitRate: this.#promptTokens === 0 ? 0 : this.#cachedTokens / this.#promptTokens,
      tokensPerS: durationS === 0 ? 0 : tokens / durationS,
      durationS,
    };
  }
}
