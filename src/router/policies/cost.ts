/**
 * `cost`, the router seed's rule: send the request where it adds the least prefill work.
 *
 *   cost(r) [tokens] = queue(r) + uncached(r)
 *   queue(r)    = prompt tokens already queued on r (not yet prefilled), and
 *   uncached(r) = promptTokens - cachedTokens(r), this request's prompt not cached on r.
 *
 * Multiply by prefill time per token (71.3 us for Llama 3.3 70B on TP=2 H200) for time. The
 * minimum wins; equal costs go to the shorter queue, then to a seeded draw. So a replica holding
 * a 6,000-token shared prefix keeps winning while its extra queue is under the 6,000 tokens its
 * hit saves and loses the moment it is not; the spill then warms a second owner.
 *
 * queueSource 'ledger' (default) reads the router's own ledger, which is exact and never stale.
 * 'reports' reads the engine's last report: its queued prompt tokens, or, when it sends only a
 * count, waiting x this request's promptTokens; 0 before the first report. Reports lag, so many
 * requests routed between two reports all see the same idle replica (herding): kept to show it.
 * A missing cache signal (no index entries) makes uncached(r) = promptTokens everywhere, and
 * the rule degrades to least queued prompt tokens.
 */
import type { Pick, PickInput, Policy, ReplicaView } from '../policy.ts';
import { argMin } from './pickBest.ts';

export type QueueSource = 'ledger' | 'reports';

export interface CostOptions {
  queueSource?: QueueSource;
}

export class CostPolicy implements Policy {
  readonly name = 'cost';
  readonly queueSource: QueueSource;

  constructor(options: CostOptions = {}) {
    this.queueSource = options.queueSource ?? 'ledger';
  }

  pick(input: PickInput): Pick {
    const { candidates, request } = input;
    const scores = new Array<number>(candidates.length);
    const queues = new Array<number>(candidates.length);
    for (let i = 0; i < candidates.length; i++) {
      const c = candidates[i]!;
      const queue = this.#queueTokens(c, request.promptTokens);
      queues[i] = queue;
      scores[i] = queue + (request.promptTokens - c.cachedTokens);
    }
    return { replicaId: candidates[argMin(scores, input.rng, queues)]!.id, scores };
  }

  #queueTokens(c: ReplicaView, promptTokens: number): number {
    if (this.queueSource === 'ledger') return c.queuedPromptTokens;
    return c.reportedQueuedPromptTokens ?? c.waiting * promptTokens;
  }
}
