/**
 * `round-robin`: the next eligible replica by id after the last one routed to. The cursor moves
 * in onRouted, so pick stays free of side effects.
 */
import type { Pick, PickInput, Policy, Routed } from '../policy.ts';

export class RoundRobinPolicy implements Policy {
  readonly name = 'round-robin';
  #nextId = 0;

  pick(input: PickInput): Pick {
    const next = input.candidates.find((c) => c.id >= this.#nextId) ?? input.candidates[0]!;
    return { replicaId: next.id };
  }

  onRouted(routed: Routed): void {
    this.#nextId = routed.replicaId + 1;
  }
}
