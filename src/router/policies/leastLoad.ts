/**
 * `least-load`, KubeAI's LeastLoad strategy (substratusai/kubeai,
 * internal/loadbalancer/balance_least_load.go, getAddrLeastLoad): the endpoint with the fewest
 * requests in flight, as the balancer counts them (the router's ledger here). KubeAI walks a Go
 * map, whose order is random, and keeps the first strict minimum: ties go to a seeded draw.
 *
 * KubeAI filters nothing else (no KV usage, no report age: it reads no engine metrics), so
 * this policy sets `ownFilters` and the router offers it every replica that is up.
 */
import type { Pick, PickInput, Policy } from '../policy.ts';
import { argMin } from './pickBest.ts';

export class LeastLoadPolicy implements Policy {
  readonly name = 'least-load';
  readonly ownFilters = true;

  pick(input: PickInput): Pick {
    const scores = input.candidates.map((c) => c.inFlight);
    return { replicaId: input.candidates[argMin(scores, input.rng)]!.id, scores };
  }
}
