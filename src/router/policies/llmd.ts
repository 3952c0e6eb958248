/**
 * `llmd`, llm-d's endpoint picker (Gateway API inference extension): a weighted sum of scores
 * normalized to 0..1, the maximum wins (ties to a seeded draw):
 *
 *   score(r) = 3 x matchedBlocks / promptBlocks
 *            + 2 x (maxQ - q(r)) / (maxQ - minQ)     (1 when all queues are equal)
 *            + 2 x (1 - kvUsage(r))
 *
 * q is the engine-reported waiting queue and kvUsage the reported KV usage, as llm-d scrapes
 * them (0 before the first report); the prefix term is 0 for a prompt under one block.
 */
import type { Pick, PickInput, Policy } from '../policy.ts';
import { argMax } from './pickBest.ts';

export const DEFAULT_LLMD_PREFIX_WEIGHT = 3;
export const DEFAULT_LLMD_QUEUE_WEIGHT = 2;
export const DEFAULT_LLMD_KV_WEIGHT = 2;

export interface LlmdOptions {
  prefixWeight?: number;
  queueWeight?: number;
  kvWeight?: number;
}

export class LlmdPolicy implements Policy {
  readonly name = 'llmd';
  readonly prefixWeight: number;
  readonly queueWeight: number;
  readonly kvWeight: number;

  constructor(options: LlmdOptions = {}) {
    this.prefixWeight = options.prefixWeight ?? DEFAULT_LLMD_PREFIX_WEIGHT;
    this.queueWeight = options.queueWeight ?? DEFAULT_LLMD_QUEUE_WEIGHT;
    this.kvWeight = options.kvWeight ?? DEFAULT_LLMD_KV_WEIGHT;
  }

  pick(input: PickInput): Pick {
    const { candidates, request } = input;
    const blocks = request.blockKeys.length;
    const queues = candidates.map((c) => c.waiting);
    const maxQ = Math.max(...queues);
    const minQ = Math.min(...queues);
    const scores = candidates.map((c) => {
      const prefix = blocks > 0 ? c.cachedBlocks / blocks : 0;
      const queue = maxQ === minQ ? 1 : (maxQ - c.waiting) / (maxQ - minQ);
      const kv = 1 - c.kvUsage;
      return this.prefixWeight * prefix + this.queueWeight * queue + this.kvWeight * kv;
    });
    return { replicaId: candidates[argMax(scores, input.rng)]!.id, scores };
  }
}
