/**
 * A token bucket on an injected clock: `ratePerS` tokens flow in per second up to `capacity`.
 * A take may run the bucket into debt when it asks for more than the capacity (a prompt larger
 * than a whole minute's allowance), so no request is refused forever: it waits for a full
 * bucket, then the debt holds the next ones back until it is paid.
 */
export class TokenBucket {
  readonly ratePerS: number;
  readonly capacity: number;
  #tokens: number;
  #atMs: number;

  constructor(ratePerS: number, capacity: number, nowMs: number) {
    if (!(ratePerS > 0 && Number.isFinite(ratePerS))) {
      throw new RangeError(`ratePerS must be a positive number, got ${ratePerS}`);
    }
    if (!(capacity > 0 && Number.isFinite(capacity))) {
      throw new RangeError(`capacity must be a positive number, got ${capacity}`);
    }
    this.ratePerS = ratePerS;
    this.capacity = capacity;
    this.#tokens = capacity;
    this.#atMs = nowMs;
  }

  /** Tokens in the bucket at `nowMs` (negative while in debt). */
  level(nowMs: number): number {
    this.#refill(nowMs);
    return this.#tokens;
  }

  /** Ms until `amount` could be taken (0: now); takes nothing. */
  waitMs(amount: number, nowMs: number): number {
    this.#refill(nowMs);
    const needed = Math.min(amount, this.capacity);
    if (this.#tokens >= needed) return 0;
    return ((needed - this.#tokens) / this.ratePerS) * 1000;
  }

  /** Takes `amount` (call after `waitMs` returned 0). */
  take(amount: number, nowMs: number): void {
    this.#refill(nowMs);
    this.#tokens -= amount;
  }

  #refill(nowMs: number): void {
    // A clock that steps back (it should not) neither adds nor removes tokens.
    const elapsedMs = Math.max(0, nowMs - this.#atMs);
    this.#atMs = Math.max(this.#atMs, nowMs);
    this.#tokens = Math.min(this.capacity, this.#tokens + (elapsedMs / 1000) * this.ratePerS);
  }
}
