/**
 * The online planner's view of live traffic: the requests of the last `windowMs`, as the gateway
 * recorded them, and the fit the simulator is given. Pure: time is the caller's `nowMs`.
 *
 * A request is kept as what the simulator needs to replay it: its arrival, prompt and output
 * lengths and its prefix as chained block keys, one per TRACE_BLOCK_TOKENS-token chunk (the key
 * of the chunk's last block, which names the whole prefix up to there). Two requests sharing a
 * prefix share those keys, so prefix sharing survives into the replay (windowTrace.ts).
 */
import type { BlockKey } from '../../kv/blockKey.ts';

/** One finished request as the planner keeps it. */
export interface Observation {
  /** Arrival at the gateway (the caller's clock, ms). */
  atMs: number;
  promptTokens: number;
  /** Tokens generated (the usage the engine reported, else max_tokens, else 1). */
  outputTokens: number;
  /** Chained keys of its full TRACE_BLOCK_TOKENS-token chunks, in order. */
  chunkKeys: readonly BlockKey[];
}

/** What the window says of the traffic (the log line and `/planner/desired` carry it). */
export interface WindowFit {
  requests: number;
  /** Requests per second over the window's span (0 with fewer than two requests). */
  ratePerS: number;
  promptTokens: Quantiles;
  outputTokens: Quantiles;
  /** Of all chunk keys in the window, the fraction seen before in it: prefix sharing, 0..1. */
  sharedChunkFraction: number;
  /** First to last arrival, ms. */
  spanMs: number;
}

export interface Quantiles {
  mean: number;
  p50: number;
  p90: number;
  p99: number;
}

/** Most requests held, whatever the window: a bound on memory at any rate. */
export const DEFAULT_MAX_OBSERVATIONS = 50_000;

export class RequestWindow {
  readonly windowMs: number;
  readonly maxObservations: number;
  // Arrival order: the oldest leave from the front (a head index, compacted now and then).
  #items: Observation[] = [];
  #head = 0;

  constructor(windowMs: number, maxObservations = DEFAULT_MAX_OBSERVATIONS) {
    if (!(windowMs > 0)) throw new RangeError(`windowMs must be > 0, got ${windowMs}`);
    if (!Number.isInteger(maxObservations) || maxObservations < 1) {
      throw new RangeError(`maxObservations must be an integer >= 1, got ${maxObservations}`);
    }
    this.windowMs = windowMs;
    this.maxObservations = maxObservations;
  }

  get size(): number {
    return this.#items.length - this.#head;
  }

  /** A request, in arrival order (an earlier arrival than the last is placed at the end anyway). */
  add(o: Observation): void {
    this.#items.push(o);
    if (this.size > this.maxObservations) this.#head++;
    this.#compact();
  }

  /** Drops what arrived before `nowMs - windowMs`. */
  prune(nowMs: number): void {
    const from = nowMs - this.windowMs;
    while (this.#head < this.#items.length && this.#items[this.#head]!.atMs < from) this.#head++;
    this.#compact();
  }

  /**
   * The requests in the window at `nowMs`, oldest first (a copy). Sorted by arrival: a peer's
   * requests (shared over NATS) come a moment after this instance's of the same time.
   */
  observations(nowMs: number): Observation[] {
    this.prune(nowMs);
    const from = nowMs - this.windowMs;
    return this.#items
      .slice(this.#head)
      .filter((o) => o.atMs >= from)
      .sort((a, b) => a.atMs - b.atMs);
  }

  fit(nowMs: number): WindowFit {
    return fitOf(this.observations(nowMs));
  }

  #compact(): void {
    if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
  }
}

/** The fit of a list of observations in arrival order. */
/**
 * The last `fastWindowMs` of a window's observations, when that is a proper part of it with at
 * least `minRequests`: the online planner searches it alone too and takes the larger answer, so a
 * rise in the rate is acted on before it fills the window. Null when off (0) or not a proper part.
 */
export function recentOf(
  obs: readonly Observation[],
  nowMs: number,
  fastWindowMs: number,
  minRequests: number,
): Observation[] | null {
  if (fastWindowMs <= 0) return null;
  const recent = obs.filter((o) => o.atMs >= nowMs - fastWindowMs);
  return recent.length >= minRequests && recent.length < obs.length ? recent : null;
}

export function fitOf(obs: readonly Observation[]): WindowFit {
  const n = obs.length;
  const spanMs = n < 2 ? 0 : obs[n - 1]!.atMs - obs[0]!.atMs;
  // n arrivals over the span are n - 1 gaps: the rate estimate of a Poisson stream.
  const ratePerS = n < 2 || spanMs <= 0 ? 0 : ((n - 1) * 1000) / spanMs;
  const seen = new Set<BlockKey>();
  let chunks = 0;
  let shared = 0;
  for (const o of obs) {
    for (const k of o.chunkKeys) {
      chunks++;
      if (seen.has(k)) shared++;
      else seen.add(k);
    }
  }
  return {
    requests: n,
    ratePerS,
    promptTokens: quantiles(obs.map((o) => o.promptTokens)),
    outputTokens: quantiles(obs.map((o) => o.outputTokens)),
    sharedChunkFraction: chunks === 0 ? 0 : shared / chunks,
    spanMs,
  };
}

function quantiles(values: number[]): Quantiles {
  if (values.length === 0) return { mean: 0, p50: 0, p90: 0, p99: 0 };
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  const mean = sorted.reduce((a, b) => a + b, 0) / sorted.length;
  return { mean, p50: at(0.5), p90: at(0.9), p99: at(0.99) };
}
