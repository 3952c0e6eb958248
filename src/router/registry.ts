/** Policy names (also metric labels) mapped to constructors; adding a policy adds one line. */
import { RouterError } from './errors.ts';
import { type AibrixOptions, AibrixPolicy } from './policies/aibrix.ts';
import { type ChwblOptions, ChwblPolicy } from './policies/chwbl.ts';
import { ConsistentHashPolicy } from './policies/consistentHash.ts';
import { type CostOptions, CostPolicy } from './policies/cost.ts';
import { type DelayCostOptions, DelayCostPolicy } from './policies/delayCost.ts';
import { type DynamoOptions, DynamoPolicy } from './policies/dynamo.ts';
import { LeastLoadPolicy } from './policies/leastLoad.ts';
import { LeastQueuedPolicy } from './policies/leastQueued.ts';
import { type LlmdOptions, LlmdPolicy } from './policies/llmd.ts';
import { type LlmdPreciseOptions, LlmdPrecisePolicy } from './policies/llmdPrecise.ts';
import { RandomPolicy } from './policies/random.ts';
import { RoundRobinPolicy } from './policies/roundRobin.ts';
import { type SglangOptions, SglangPolicy } from './policies/sglang.ts';
import type { Policy } from './policy.ts';

/** Every policy's options in one bag; each constructor reads the fields it knows. */
export type PolicyOptions = CostOptions &
  DelayCostOptions &
  ChwblOptions &
  SglangOptions &
  DynamoOptions &
  LlmdOptions &
  LlmdPreciseOptions &
  AibrixOptions;

const REGISTRY = {
  cost: (o: PolicyOptions) => new CostPolicy(o),
  'delay-cost': (o: PolicyOptions) => new DelayCostPolicy(o),
  random: () => new RandomPolicy(),
  'round-robin': () => new RoundRobinPolicy(),
  'least-queued': () => new LeastQueuedPolicy(),
  'consistent-hash': (o: PolicyOptions) => new ConsistentHashPolicy(o),
  chwbl: (o: PolicyOptions) => new ChwblPolicy(o),
  sglang: (o: PolicyOptions) => new SglangPolicy(o),
  dynamo: (o: PolicyOptions) => new DynamoPolicy(o),
  llmd: (o: PolicyOptions) => new LlmdPolicy(o),
  'llmd-precise': (o: PolicyOptions) => new LlmdPrecisePolicy(o),
  'least-load': () => new LeastLoadPolicy(),
  aibrix: (o: PolicyOptions) => new AibrixPolicy(o),
} satisfies Record<string, (options: PolicyOptions) => Policy>;

export type PolicyName = keyof typeof REGISTRY;

/** Policies with adapter terms, which the `loraBlind` option turns off. */
export const LORA_AWARE_POLICIES: readonly PolicyName[] = ['cost', 'delay-cost', 'llmd'];

export const POLICY_NAMES = Object.keys(REGISTRY) as PolicyName[];

export function isPolicyName(name: string): name is PolicyName {
  return Object.hasOwn(REGISTRY, name);
}

export function makePolicy(name: string, options: PolicyOptions = {}): Policy {
  if (!isPolicyName(name)) {
    throw new RouterError(
      'ERR_UNKNOWN_POLICY',
      `unknown routing policy '${name}'; known: ${POLICY_NAMES.join(', ')}`,
    );
  }
  return REGISTRY[name](options);
}
