/**
 * `dynamo`, NVIDIA Dynamo's KV router cost, in blocks:
 *
 *   cost(r) = w x (activePrefillBlocks(r) + requestBlocks - overlapBlocks(r))
 *             + activeDecodeBlocks(r),   w = 1.0
 *
 * requestBlocks = ceil(promptTokens / blockSize); overlapBlocks = cached prefix blocks on r;
 * active prefill blocks are the uncached blocks of requests still in prefill and move to the
 * decode term (as the whole prompt's blocks) when the first token arrives (router ledger).
 * Argmin; ties to the replica with the smaller tree (fewer indexed blocks), then a seeded draw.
 */
import type { Pick, PickInput, Policy } from '../policy.ts';
import { argMin } from './pickBest.ts';

export const DEFAULT_DYNAMO_OVERLAP_WEIGHT = 1.0;

export interface DynamoOptions {
  overlapWeight?: number;
}

export class DynamoPolicy implements Policy {
  readonly name = 'dynamo';
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
