/**
 * `dynamo`, NVIDIA Dynamo's KV router cost, in blocks (ai-dynamo/dynamo,
 * lib/llm/src/kv_router/scheduler.rs, DefaultWorkerSelector and softmax_sample; the defaults
 * in docs/router/kv_cache_routing.md: --kv-overlap-score-weight 1, --router-temperature 0):
 *
 *   cost(r) = w x (activePrefillBlocks(r) + requestBlocks - overlapBlocks(r))
 *             + activeDecodeBlocks(r),   w = 1.0
 *
 * requestBlocks = ceil(promptTokens / blockSize); overlapBlocks = cached prefix blocks on r;
 * active prefill blocks are the uncached blocks of requests still in prefill and move to the
 * decode term (as the whole prompt's blocks) when the first token arrives (router ledger).
 * Temperature 0: the argmin; ties to the replica with the smaller tree (fewer indexed blocks),
 * then a seeded draw.
 *
 * Dynamo's busy threshold (workers over a KV usage marked busy) is off unless configured, so
 * by default it filters nothing but workers that left: this policy sets `ownFilters`, and the
 * router offers it every replica that is up.
 */
import type { Pick, PickInput, Policy } from '../policy.ts';
import { argMin } from './pickBest.ts';

export const DEFAULT_DYNAMO_OVERLAP_WEIGHT = 1.0;

export interface DynamoOptions {
  overlapWeight?: number;
}

export class DynamoPolicy implements Policy {
  readonly name = 'dynamo';
  readonly ownFilters = true;
  readonly overlapWeight: number;

  constructor(options: DynamoOptions = {}) {
    this.overlapWeight = options.overlapWeight ?? DEFAULT_DYNAMO_OVERLAP_WEIGHT;
  }

  pick(input: PickInput): Pick {
    const { candidates, request } = input;
    const requestBlocks = Math.ceil(request.promptTokens / request.blockSize);
    const scores = candidates.map(
      (c) =>
        this.overlapWeight * (c.activePrefillBlocks + requestBlocks - c.cachedBlocks) +
        c.activeDecodeBlocks,
    );
    const trees = candidates.map((c) => c.indexedBlocks);
    return { replicaId: candidates[argMin(scores, input.rng, trees)]!.id, scores };
  }
}
