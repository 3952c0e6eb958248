/**
 * Checks on what an engine claims that an engine which lies consistently cannot fake. Pure:
 * the shells (gateway, simulator) gather the figures; the audit (`verdict.ts`) counts the results.
 *
 * - `clampReported`: a reported cached-token count is a number the engine chose; it is clamped
 *   to [0, prompt tokens] before any counter, and a non-finite one is ignored (malformed).
 * - `testClaimSpeed`: a claimed hit must also be fast. Prefilling a prompt whose `claimed` tokens
 *   are cached takes `warmMs` on an idle engine of the replica's speed, the whole prompt `coldMs`.
 *   A time to first token of at least `REFUTE_FRACTION x coldMs` refutes the claim. The test is
 *   run only when it has power: `coldMs >= MIN_POWER_RATIO x warmMs` (a claim that saves little
 *   prefill time cannot be told from a cold prefill by its speed).
 * - `exceedsPool`: the index cannot hold more blocks for a replica than its KV pool has
 *   (`num_gpu_blocks`). An engine that never publishes `BlockRemoved`, or publishes stores it
 *   never made, drives its stored-minus-removed count past `poolBoundBlocks(pool) = pool +
 *   max(1, floor(pool / 16))` (the slack covers removals still in flight).
 * - `windowForPool` / `smallPool`: the window grows with the pool, and a pool that holds fewer
 *   than SMALL_POOL_PROMPTS prompts churns honestly within a window, so there an over-prediction
 *   without evidence (a refuted claim, an overflowing index) is no miss.
 */

/** A claimed hit is refuted when the TTFT is at least this fraction of the cold prefill time. */
export const REFUTE_FRACTION = 0.75;
/** The speed test runs only when the cold prefill takes at least this many warm ones. */
export const MIN_POWER_RATIO = 4;
/** A pool holding fewer prompts than this churns within a window. */
export const SMALL_POOL_PROMPTS = 32;
/** The window's bounds, in requests (`windowForPool`). */
export const MIN_POOL_WINDOW = 32;
export const MAX_POOL_WINDOW = 128;

/** A reported count made safe for counters; null: not a finite number (malformed, ignored). */
export interface ClampedReport {
  tokens: number;
  /** The engine said more than the prompt (or less than 0). */
  clamped: boolean;
}

export function clampReported(reportedTokens: number, promptTokens: number): ClampedReport | null {
  if (!Number.isFinite(reportedTokens)) return null;
  const max = Number.isFinite(promptTokens) && promptTokens > 0 ? promptTokens : 0;
  const tokens = Math.min(max, Math.max(0, reportedTokens));
  return { tokens, clamped: tokens !== reportedTokens };
}

/** What one response's speed says of its claim. */
export type ClaimSpeed = 'consistent' | 'refuted' | 'untested';

/** The figures of the speed test, all in milliseconds. */
export interface SpeedEvidence {
  /** Arrival (or routing) to first token. */
  ttftMs: number;
  /** The whole prompt prefilled on an idle engine of the replica's speed. */
  coldMs: number;
  /** The same with the claimed tokens cached. */
  warmMs: number;
}

export function testClaimSpeed(e: SpeedEvidence): ClaimSpeed {
  const { ttftMs, coldMs, warmMs } = e;
  if (!Number.isFinite(ttftMs) || !Number.isFinite(coldMs) || !Number.isFinite(warmMs)) {
    return 'untested';
  }
  if (coldMs <= 0 || warmMs < 0 || ttftMs < 0) return 'untested';
  if (coldMs < MIN_POWER_RATIO * warmMs) return 'untested';
  return ttftMs >= REFUTE_FRACTION * coldMs ? 'refuted' : 'consistent';
}

/**
 * The speed test's figures for one response from a replica that prefills `prefillMsPerToken`
 * per uncached token (its `ReplicaSpeed`): the whole prompt cold, the prompt less the tokens the
 * engine claimed (clamped to [0, prompt]) warm, and the measured time to first token.
 */
export function speedEvidenceOf(
  prefillMsPerToken: number,
  promptTokens: number,
  claimedTokens: number,
  ttftMs: number,
): SpeedEvidence {
  const prompt = Number.isFinite(promptTokens) ? Math.max(0, promptTokens) : 0;
  const claimed = Number.isFinite(claimedTokens) ? Math.min(prompt, Math.max(0, claimedTokens)) : 0;
  return {
    ttftMs,
    coldMs: prompt * prefillMsPerToken,
    warmMs: (prompt - claimed) * prefillMsPerToken,
  };
}

/** The most blocks the index may hold for a replica whose pool has `poolBlocks`. */
export function poolBoundBlocks(poolBlocks: number): number {
  return poolBlocks + Math.max(1, Math.floor(poolBlocks / 16));
}

/** The index holds more blocks for the replica than its pool can: removals were never sent. */
export function exceedsPool(indexedBlocks: number, poolBlocks: number): boolean {
  if (!(poolBlocks >= 1) || !Number.isFinite(indexedBlocks)) return false;
  return indexedBlocks > poolBoundBlocks(poolBlocks);
}

/** The pool holds fewer than SMALL_POOL_PROMPTS prompts of this size. */
export function smallPool(poolBlocks: number, promptTokens: number, blockSize: number): boolean {
  const promptBlocks = Math.max(1, Math.ceil(promptTokens / blockSize));
  return poolBlocks < SMALL_POOL_PROMPTS * promptBlocks;
}

/**
 * Requests judged together for a replica whose pool has `poolBlocks`: floor(sqrt(pool)) clamped
 * to [MIN_POOL_WINDOW, MAX_POOL_WINDOW]. A larger pool turns over more slowly, so a fault (a lost
 * removal) shows later and more thinly; a longer window (its threshold from the same false-alarm
 * budget, a smaller fraction of it) catches it. 64 blocks: 32; 4,096: 64; 34,882: 128.
 */
export function windowForPool(poolBlocks: number): number {
  if (!(poolBlocks >= 1)) return MIN_POOL_WINDOW;
  return Math.min(MAX_POOL_WINDOW, Math.max(MIN_POOL_WINDOW, Math.floor(Math.sqrt(poolBlocks))));
}
