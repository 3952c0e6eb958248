/**
 * Why a replica search met the SLO at no count: a p99 over too few requests, requests that no
 * fleet can serve in time, or the policy. Run once per search that found nothing.
 *
 * - A p99 needs at least MIN_MEASURED_FOR_P99 measured requests: below 100 it is the maximum,
 *   and one slow request decides the verdict.
 * - A request is out of reach when even the best fleet misses its TTFT limit: a replica to
 *   itself that caches every block any earlier request brought (a first-seen prompt, or its
 *   first-seen tail, is prefilled cold). When more measured requests are out of reach than a
 *   p99 allows (n - ceil(0.99 n)), no replica count and no policy meets the SLO: a fixed target
 *   under a long prompt's own prefill, or a run so short that cold starts are over 1 % of it.
 */
import { makeIdlePrefill } from '../engine/idlePrefill.ts';
import type { BlockKey } from '../kv/blockKey.ts';
import { makeEngineConfig } from '../engine/options.ts';
import type { SearchUnmet } from '../results/result.ts';
import { ttftLimitMs } from '../results/slo.ts';
import type { Arrival } from '../workload/arrival.ts';
import type { Workload } from '../workload/types.ts';
import { makeWorkload, type SimConfig } from './run.ts';

/** Fewest measured requests whose p99 is not simply their maximum. */
export const MIN_MEASURED_FOR_P99 = 100;

export function diagnoseUnmet(config: SimConfig, maxReplicas: number): SearchUnmet {
  const workload = makeWorkload(config);
  const engine = makeEngineConfig(config.engine);
  const idleMs = makeIdlePrefill(engine);
  let measured = 0;
  let outOfReach = 0;
  for (const { arrival, cachedBlocks } of arrivalsWithBestCache(workload)) {
    if (arrival.atMs < config.warmupMs) continue;
    measured++;
    const prompt = arrival.promptLength;
    const bestMs = idleMs(prompt, cachedBlocks * workload.blockSize);
    if (bestMs > ttftLimitMs(config.slo, idleMs(prompt))) outOfReach++;
  }
  const reason =
    measured < MIN_MEASURED_FOR_P99
      ? 'too-few-measured'
      : outOfReach > measured - Math.ceil(0.99 * measured)
        ? 'out-of-reach'
        : 'not-met';
  return { reason, measured, outOfReach, maxReplicas };
}

/**
 * Each arrival of `workload`, in order, with the leading blocks of its prompt that an earlier
 * arrival brought: what the best fleet caches (one cache that forgets nothing), so what no
 * router can beat.
 */
export function* arrivalsWithBestCache(
  workload: Workload,
): Generator<{ arrival: Arrival; cachedBlocks: number }> {
  const seen = new Set<BlockKey>();
  const it = workload.arrivals();
  for (let a = it.next(); !a.done; a = it.next()) {
    const arrival = a.value;
    const { blockKeys } = workload.materialize(arrival);
    let cachedBlocks = 0;
    while (cachedBlocks < blockKeys.length && seen.has(blockKeys[cachedBlocks]!)) cachedBlocks++;
    for (const key of blockKeys) seen.add(key);
    yield { arrival, cachedBlocks };
  }
}
