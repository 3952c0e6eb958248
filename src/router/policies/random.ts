/** `random`: a uniform seeded draw among eligible replicas; the no-information baseline. */
import type { Pick, PickInput, Policy } from '../policy.ts';

export class RandomPolicy implements Policy {
  readonly name = 'random';

  pick(input: PickInput): Pick {
    return { replicaId: input.candidates[input.rng.int(input.candidates.length)]!.id };
  }
}
