/**
 * `llmd`, llm-d's endpoint picker (Gateway API inference extension): a weighted sum of scores
 * normalized to 0..1, the maximum wins (ties to a seeded draw):
 *
 *   score(r) = 3 x matchedBlocks / promptBlocks
 *            + 2 x (maxQ - q(r)) / (maxQ - minQ)     (1 when all queues are equal)
 *            + 2 x (1 - kvUsage(r))
 *
 * q is the engine-reported waiting queue and kvUsage the reported KV usage, as llm-d scrapes
 * them (0 before the first report); the prefix term is 0 for a prompt under one block. The queue
 * and KV terms are the inference extension's queue and kv-cache-utilization scorers of September
 * 2025, read at v1.0.1 (2b313acf, pkg/epp/scheduling/framework/plugins/scorer/queue.go and
 * kvcache_utilization.go): min-max over `WaitingQueueSize`, 1.0 for all when equal, and
 * `1 - KVCacheUsagePercent`. With `prefixMaxBlocks` (llm-d's approximate record:
 * `--approx-forget llmd|peer`) the prefix term counts only the blocks that scorer hashes.
 *
 * A request for a LoRA adapter adds llm-d's `lora-affinity-scorer` (weight 1, the scheduler's
 * default scorer weight), which reads `vllm:lora_requests_info` (Gateway API inference extension,
 * pkg/epp/scheduling/framework/plugins/scorer/lora_affinity.go, LoraAffinityScorer.Score):
 *
 *   + 1 x (1.0  the adapter is active (running) there
 *          0.8  else, running + waiting adapters < max_lora (room to load it)
 *          0.6  else, the adapter is waiting there
 *          0.0  otherwise)
 *
 * with active and waiting adapters as the router knows them (report and its own routes). llm-d
 * filters nothing for adapters (loraAware false): a replica without room only scores lower.
 *
 * These are the inference extension's default weights (prefix 3, queue 2, KV 2); llm-d's
 * precise-prefix configuration is `llmd-precise` (llmdPrecise.ts). Neither configuration
 * filters on KV usage or report age, so this policy sets `ownFilters`, and the router offers it
 * every replica that is up.
 */
import type { LoraView } from '../adapters.ts';
import type { Pick, PickInput } from '../policy.ts';
import { PeerPolicy } from './peerPolicy.ts';
import { argMax } from './pickBest.ts';

/** The scorers' weights, each an option of the same name. */
const LLMD_DEFAULTS = { prefixWeight: 3, queueWeight: 2, kvWeight: 2, loraWeight: 1 };

export interface LlmdOptions extends Partial<typeof LLMD_DEFAULTS> {
  /** Ignore adapters (no LoRA-affinity term). */
  loraBlind?: boolean;
  /**
   * The prefix scorer hashes only a prompt's first this many blocks (llm-d's
   * `maxPrefixBlocksToMatch`, in the engine's blocks: approxForgetting.ts), so its score is
   * matched / min(prompt blocks, this); absent: every block.
   */
  prefixMaxBlocks?: number;
}

export class LlmdPolicy extends PeerPolicy<typeof LLMD_DEFAULTS> {
  readonly name = 'llmd';

  readonly #prefixMaxBlocks: number;

  constructor(options: LlmdOptions = {}) {
    super(LLMD_DEFAULTS, options.loraBlind ? { ...options, loraWeight: 0 } : options);
    this.#prefixMaxBlocks = options.prefixMaxBlocks ?? 0;
  }

  pick(input: PickInput): Pick {
    const { candidates, request } = input;
    const cap = this.#prefixMaxBlocks;
    // plugin.go's Score: matchLen / len(hashes), the hashes of the first maxPrefixBlocks only.
    const blocks = cap > 0 ? Math.min(request.blockKeys.length, cap) : request.blockKeys.length;
    const queues = queueScores(candidates);
    const { prefixWeight, queueWeight, kvWeight, loraWeight } = this.tunables;
    const scores = candidates.map((c, i) => {
      const prefix = blocks > 0 ? Math.min(c.cachedBlocks, blocks) / blocks : 0;
      const queue = queues[i]!;
      const kv = 1 - c.kvUsage;
      const score = prefixWeight * prefix + queueWeight * queue + kvWeight * kv;
      return request.lora && loraWeight > 0 ? score + loraWeight * loraAffinity(c.lora) : score;
    });
    return { replicaId: candidates[argMax(scores, input.rng)]!.id, scores };
  }
}

/**
 * The inference extension's queue scorer (pkg/epp/scheduling/framework/plugins/scorer/queue.go)
 * over the candidates' waiting queues: (maxQ - q) / (maxQ - minQ), 1 for each when they are all
 * equal. `llmd` and `llmd-precise` both weigh it.
 */
export function queueScores(candidates: readonly { waiting: number }[]): number[] {
  let maxQ = Number.NEGATIVE_INFINITY;
  let minQ = Number.POSITIVE_INFINITY;
  for (const c of candidates) {
    if (c.waiting > maxQ) maxQ = c.waiting;
    if (c.waiting < minQ) minQ = c.waiting;
  }
  return candidates.map((c) => (maxQ === minQ ? 1 : (maxQ - c.waiting) / (maxQ - minQ)));
}

/** llm-d's LoraAffinityScorer for one replica (unknown max_lora: room to load). */
export function loraAffinity(v: Readonly<LoraView>): number {
  if (v.running) return 1;
  if (v.maxLoras === undefined || v.active < v.maxLoras) return 0.8;
  if (v.waiting) return 0.6;
  return 0;
}

/** Each default under a name of its own. */
export const {
  prefixWeight: DEFAULT_LLMD_PREFIX_WEIGHT,
  queueWeight: DEFAULT_LLMD_QUEUE_WEIGHT,
  kvWeight: DEFAULT_LLMD_KV_WEIGHT,
} = LLMD_DEFAULTS;
