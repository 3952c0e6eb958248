/**
 * The attention-pair rate of a step table from paired probes: each warm run (one chunk after a
 * cached prefix) is timed right after a cold run of the same chunk, so the two see the same
 * load, and their difference is what reading the cached context adds. Each pair gives
 * (warm - cold) / pairs, with pairs = chunk tokens x cached tokens (what `contextPairs` in
 * src/model/stepTable.ts counts for that chunk); the rate is the median over every pair of
 * every warm probe: a pair that met a burst of contention on one side moves it little, where a
 * least-squares fit over the medians of each side took it from the noise. Pure: no I/O.
 */

/** One warm run beside the cold run before it. */
export interface WarmColdPair {
  warmMs: number;
  coldMs: number;
  /** Attention pairs the warm chunk reads beyond the cold one's: chunk x cached tokens. */
  pairs: number;
  /** Cached tokens before the warm chunk (absent: not known; such a pair has no context). */
  contextTokens?: number;
}

/** ms per context pair (>= 0), or null when no pair has any context. */
export function contextPairRate(pairs: readonly WarmColdPair[]): number | null {
  const rates = pairs
    .filter((p) => p.pairs > 0 && Number.isFinite(p.warmMs) && Number.isFinite(p.coldMs))
    .map((p) => (p.warmMs - p.coldMs) / p.pairs)
    .sort((a, b) => a - b);
  if (rates.length === 0) return null;
  return Math.max(0, median(rates));
}

/**
 * The pair rate at each context the warm probes were timed at: `contextPairRate` over the pairs
 * of each context, ascending by context; null when fewer than two contexts have a rate (one
 * rate is `contextPairRate`'s). A CPU's attention per pair grows with the context, so a
 * workload's long chunks are charged the rate measured near their context.
 */
export function contextPairRates(
  pairs: readonly WarmColdPair[],
): { contextTokens: number[]; msPerPair: number[] } | null {
  const byContext = new Map<number, WarmColdPair[]>();
  for (const p of pairs) {
    if (p.contextTokens === undefined || !(p.contextTokens > 0)) continue;
    const list = byContext.get(p.contextTokens) ?? [];
    list.push(p);
    byContext.set(p.contextTokens, list);
  }
  const contextTokens: number[] = [];
  const msPerPair: number[] = [];
  for (const c of [...byContext.keys()].sort((a, b) => a - b)) {
    const rate = contextPairRate(byContext.get(c)!);
    if (rate === null) continue;
    contextTokens.push(c);
    msPerPair.push(rate);
  }
  return contextTokens.length >= 2 ? { contextTokens, msPerPair } : null;
}

function median(rates: readonly number[]): number {
  const mid = rates.length / 2;
  return rates.length % 2 === 1 ? rates[Math.floor(mid)]! : (rates[mid - 1]! + rates[mid]!) / 2;
}
