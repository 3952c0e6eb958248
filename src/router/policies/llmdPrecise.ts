/**
 * `llmd-precise`, llm-d's endpoint picker as its precise-prefix-cache example configures it
 * (llm-d/llm-d-inference-scheduler, deploy/config/epp-precise-prefix-cache-config.yaml):
 *
 *   decode-filter                      -> every replica of an aggregated fleet passes
 *   precise-prefix-cache-scorer  x 2.0
 *   kv-cache-utilization-scorer  x 1.0
 *   queue-scorer                 x 1.0
 *   max-score-picker                   -> the highest sum, ties to a seeded draw
 *
 * Each scorer gives 0..1:
 * - precise prefix (pkg/plugins/scorer/precise_prefix_cache.go, Score, and utils.go,
 *   indexedScoresToNormalizedScoredPods): the KV-event index's longest cached prefix of each
 *   pod, in blocks, for the pods where the prompt's first block is cached; min-max normalized
 *   over those pods, 1 for each when they all match alike, 0 for a pod the index has nothing of;
 * - KV utilization (gateway-api-inference-extension, kv-cache-utilization scorer): 1 - kvUsage
 *   of the last scrape;
 * - queue (the same repository's queue scorer): (maxQ - q) / (maxQ - minQ) over the waiting
 *   queues scraped, 1 for all when they are equal.
 *
 * No filter on KV usage or report age: the configuration has none, so this policy sets
 * `ownFilters` and the router offers it every replica that is up. (The `llmd` policy is the
 * inference extension's default weights, 3/2/2, behind kvroute's guards.)
 */
import type { Pick, PickInput, Policy } from '../policy.ts';
import { queueScores } from './llmd.ts';
import { argMax } from './pickBest.ts';

export const DEFAULT_LLMD_PRECISE_PREFIX_WEIGHT = 2;
export const DEFAULT_LLMD_PRECISE_KV_WEIGHT = 1;
export const DEFAULT_LLMD_PRECISE_QUEUE_WEIGHT = 1;

export interface LlmdPreciseOptions {
  precisePrefixWeight?: number;
  preciseKvWeight?: number;
  preciseQueueWeight?: number;
}

export class LlmdPrecisePolicy implements Policy {
  readonly name = 'llmd-precise';
  readonly ownFilters = true;
  readonly prefixWeight: number;
  readonly kvWeight: number;
  readonly queueWeight: number;

  constructor(options: LlmdPreciseOptions = {}) {
    this.prefixWeight = options.precisePrefixWeight ?? DEFAULT_LLMD_PRECISE_PREFIX_WEIGHT;
    this.kvWeight = options.preciseKvWeight ?? DEFAULT_LLMD_PRECISE_KV_WEIGHT;
    this.queueWeight = options.preciseQueueWeight ?? DEFAULT_LLMD_PRECISE_QUEUE_WEIGHT;
  }

  pick(input: PickInput): Pick {
    const { candidates } = input;
    const prefix = precisePrefixScores(candidates.map((c) => c.cachedBlocks));
    const queue = queueScores(candidates);
    const scores = candidates.map(
      (c, i) =>
        this.prefixWeight * prefix[i]! +
        this.kvWeight * (1 - c.kvUsage) +
        this.queueWeight * queue[i]!,
    );
    return { replicaId: candidates[argMax(scores, input.rng)]!.id, scores };
  }
}

/**
 * The precise-prefix-cache scorer's normalization of longest matches (blocks): over the replicas
 * that match at least one block, (m - min) / (max - min), or 1 each when min = max; 0 for a
 * replica that matches nothing (the index returns no score for it).
 */
export function precisePrefixScores(matchedBlocks: readonly number[]): number[] {
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  for (const m of matchedBlocks) {
    if (m <= 0) continue;
    if (m < min) min = m;
    if (m > max) max = m;
  }
  return matchedBlocks.map((m) => {
    if (m <= 0) return 0;
    return min === max ? 1 : (m - min) / (max - min);
  });
}
