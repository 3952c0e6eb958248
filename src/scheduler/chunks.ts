/** How many prefill tokens one request gets in one step. */

export interface ChunkRules {
  /** Most prompt tokens per request per step (Infinity: no cap). */
  longPrefillThreshold: number;
  /** Chunks other than a prompt's last end on a multiple of this (1: no alignment). */
  alignTokens: number;
}

/**
 * Tokens to prefill this step for a request with `computedTokens` of `endTokens` done and
 * `leftTokens` of budget left: as many as fit, capped by the long-prefill threshold, and rounded
 * down to a block boundary unless the chunk ends the prefill. 0 means "not this step".
 */
export function prefillChunkTokens(
  computedTokens: number,
  endTokens: number,
  leftTokens: number,
  rules: ChunkRules,
): number {
  let tokens = Math.min(endTokens - computedTokens, leftTokens, rules.longPrefillThreshold);
  const reached = computedTokens + tokens;
  if (rules.alignTokens > 1 && reached < endTokens) {
    tokens = reached - (reached % rules.alignTokens) - computedTokens;
  }
  return Math.max(tokens, 0);
}
