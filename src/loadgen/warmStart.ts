/**
 * Was the fleet warm before the run? The first request of each customer (prefix group,
 * conversation, a trace's first block) shares its prefix with no earlier request of the run, so
 * on a fresh fleet it finds nothing cached. When more than half of the first 20 such requests
 * found at least a tenth of their prompt cached, the fleet held this workload's prefixes before
 * the run began: an earlier run warmed it (the same seed sends the same prompts), and the hit
 * rate and TTFT read better than a cold start would. A tenth, not any: a shared first token
 * (BOS) or a chat template's header may be cached on a fresh fleet too.
 */
import type { ColdStart } from '../results/result.ts';
import type { BenchRequest } from './collect.ts';

/** First requests of new customers looked at. */
export const COLD_CHECKED = 20;
/** Share of a prompt cached that counts as a hit. */
export const COLD_CACHED_SHARE = 0.1;

/**
 * The check over a run's requests (any order); null when no first request of a customer
 * completed with a cached-token count (a server that does not report it, no customers).
 */
export function coldStartCheck(requests: readonly BenchRequest[]): ColdStart | null {
  const byArrival = [...requests].sort((a, b) => a.index - b.index);
  const seen = new Set<number>();
  let checked = 0;
  let cached = 0;
  for (const r of byArrival) {
    if (checked >= COLD_CHECKED) break;
    if (r.customer < 0 || seen.has(r.customer)) continue;
    seen.add(r.customer);
    if (r.error !== null || r.cachedTokens === null || r.promptTokens <= 0) continue;
    checked++;
    if (r.cachedTokens >= COLD_CACHED_SHARE * r.promptTokens) cached++;
  }
  if (checked === 0) return null;
  return { requests: checked, cached, warm: cached * 2 > checked };
}

/** The warning a warm start deserves, in words; null when the start was cold. */
export function warmStartWarning(c: ColdStart | null | undefined): string | null {
  if (!c?.warm) return null;
  return (
    `${c.cached} of the first ${c.requests} requests of new customers found their prompt ` +
    'cached: the fleet was warm before this run (an earlier run with the same seed sends the ' +
    'same prompts), so hit rate and TTFT read better than from a cold start'
  );
}
