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
import type { Pick, PickInput } from '../policy.ts';
import { queueScores } from './llmd.ts';
import { PeerPolicy } from './peerPolicy.ts';
import { argMax } from './pickBest.ts';

/** The scorers' weights, each an option of the same name. */
const LLMD_PRECISE_DEFAULTS = { precisePrefixWeight: 2, preciseKvWeight: 1, preciseQueueWeight: 1 };

export type LlmdPreciseOptions = Partial<typeof LLMD_PRECISE_DEFAULTS>;

export class LlmdPrecisePolicy extends PeerPolicy<typeof LLMD_PRECISE_DEFAULTS> {
  readonly name = 'llmd-precise';

  constructor(options: LlmdPreciseOptions = {}) {
    super(LLMD_PRECISE_DEFAULTS, options);
  }

  pick(input: PickInput): Pick {
    const { candidates } = input;
    const prefix = precisePrefixScores(candidates.map((c) => c.cachedBlocks));
    const queue = queueScores(candidates);
    const { precisePrefixWeight, preciseKvWeight, preciseQueueWeight } = this.tunables;
    const scores = candidates.map(
      (c, i) =>
        precisePrefixWeight * prefix[i]! +
        preciseKvWeight * (1 - c.kvUsage) +
        preciseQueueWeight * queue[i]!,
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

/** Each default under a name of its own. */
export const {
  precisePrefixWeight: DEFAULT_LLMD_PRECISE_PREFIX_WEIGHT,
  preciseKvWeight: DEFAULT_LLMD_PRECISE_KV_WEIGHT,
  preciseQueueWeight: DEFAULT_LLMD_PRECISE_QUEUE_WEIGHT,
} = LLMD_PRECISE_DEFAULTS;
