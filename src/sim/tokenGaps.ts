/**
 * When each request in flight last produced a token, in dense arrays indexed by a slot. The
 * fleet hands a request's slot to its engine (`EngineRequest.handle`) and gets it back with every
 * token, so a token's gap comes from these arrays. On a large fleet a step's tokens belong to
 * requests last touched hundreds of steps before: finding each by id (its Map entry, its id
 * string, its record) was a few cache misses a token, while slots are reused as requests end,
 * so these arrays stay about as long as the requests in flight and stay in cache.
 */
import { grown } from '../util/grown.ts';

export class TokenGaps {
  #lastMs = new Float64Array(64);
  #measured = new Uint8Array(64);
  readonly #free: number[] = [];
  #next = 0;

  /** A slot for a new request, no token yet. `measured`: its gaps count (past the warm-up). */
  open(measured: boolean): number {
    const slot = this.#free.pop() ?? this.#next++;
    if (slot === this.#lastMs.length) this.#grow();
    this.#lastMs[slot] = Number.NaN;
    this.#measured[slot] = measured ? 1 : 0;
    return slot;
  }

  /** The request has left the fleet: its slot goes to a later one. */
  close(slot: number): void {
    this.#free.push(slot);
  }

  /** A token of the request at `nowMs`: the gap since its last one in ms, NaN for its first. */
  tick(slot: number, nowMs: number): number {
    const gapMs = nowMs - this.#lastMs[slot]!;
    this.#lastMs[slot] = nowMs;
    return gapMs;
  }

  /** Whether the request's gaps count (it arrived after the warm-up). */
  measured(slot: number): boolean {
    return this.#measured[slot] === 1;
  }

  /** The most requests in flight at once so far: the slots made. */
  get peakInFlight(): number {
    return this.#next;
  }

  #grow(): void {
    this.#lastMs = grown(this.#lastMs, new Float64Array(this.#lastMs.length * 2));
    this.#measured = grown(this.#measured, new Uint8Array(this.#measured.length * 2));
  }
}
