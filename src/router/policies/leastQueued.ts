/**
 * `least-queued`: fewest queued prompt tokens (router ledger), ties to a seeded draw. The seed's
 * reversal baseline: it never concentrates load, and wins when little of each prompt is shared.
 */
import type { Pick, PickInput, Policy } from '../policy.ts';
import { argMin } from './pickBest.ts';

export class LeastQueuedPolicy implements Policy {
  readonly name = 'least-queued';

  pick(input: PickInput): Pick {
    const scores = input.candidates.map((c) => c.queuedPromptTokens);
    return { replicaId: input.candidates[argMin(scores, input.rng)]!.id, scores };
  }
}
