/**
 * The decode replica, by decode load: the replica whose next step a new stream would make the
 * shortest, by the cost model's mixed step (so the TPOT each of its streams sees):
 *
 *   tpotMs(r) = mixedStepMs(spec, {decodeTokens: batch(r), prefillTokens: min(queued(r), budget),
 *                                  kvTokensRead: kvUsage(r) x poolTokens + promptTokens})
 *   batch(r)  = max(running(r), decodes routed there and unfinished) + 1
 *
 * `queued(r)` is the prefill the router's ledger has queued there (an aggregated `both` replica's
 * own prompts, which mixed steps make every stream wait for). Replicas at or above the KV
 * threshold are skipped while another is under it. A replica with no report yet counts as
 * empty (running 0, KV 0). Ties go to fewer requests in flight, then to the first listed.
 */
import { kvPoolTokens, mixedStepMs, type ReplicaSpec } from './cost.ts';

export interface DecodeCandidate {
  name: string;
  running: number | null;
  kvUsage: number | null;
  inFlight: number;
  decodeRequests: number;
  queuedPromptTokens: number;
}

export function decodeTpotMs(
  spec: ReplicaSpec,
  c: DecodeCandidate,
  promptTokens: number,
  budgetTokens: number,
): number {
  const batch = Math.max(c.running ?? 0, c.decodeRequests) + 1;
  const kvTokensRead = (c.kvUsage ?? 0) * kvPoolTokens(spec) + promptTokens;
  return mixedStepMs(spec, {
    decodeTokens: batch,
    prefillTokens: Math.min(c.queuedPromptTokens, budgetTokens),
    kvTokensRead,
  });
}

/** Index of the decode replica to use; -1 when there is none. */
export function pickDecode(
  candidates: readonly DecodeCandidate[],
  spec: ReplicaSpec,
  promptTokens: number,
  kvThreshold: number,
  budgetTokens: number,
): number {
  const underKv = candidates.filter((c) => (c.kvUsage ?? 0) < kvThreshold);
  const pool = underKv.length > 0 ? underKv : candidates;
  let best = -1;
  let bestMs = Number.POSITIVE_INFINITY;
  let bestInFlight = Number.POSITIVE_INFINITY;
  for (const c of pool) {
    const ms = decodeTpotMs(spec, c, promptTokens, budgetTokens);
    if (ms < bestMs || (ms === bestMs && c.inFlight < bestInFlight)) {
      best = candidates.indexOf(c);
      bestMs = ms;
      bestInFlight = c.inFlight;
    }
  }
  return best;
}
