/**
 * The router seed's capacity arithmetic, as pure functions: what a prefix hit saves, whether the
 * prefix set fits in a replica's KV pool, and how many replicas the load needs with and without
 * affinity. Every intermediate is returned so the CLI can print the derivation line by line.
 */
import {
  decodeStepMs,
  kvPoolTokens,
  prefillUsPerToken,
  type ReplicaSpec,
  weightBytes,
} from './cost.ts';

export interface LoadInput {
  /** Requests per second. */
  rate: number;
  promptTokens: number;
  /** Leading prompt tokens shared with other requests of the same customer. */
  sharedTokens: number;
  /** Distinct shared prefixes (customers). */
  prefixes: number;
  outputTokens: number;
  /** Target replica utilization (the seed plans at 0.65). */
  utilization: number;
  /** Decode batch the fleet runs at. */
  batch: number;
  /** Fraction of requests that hit a warm prefix under affinity. */
  hitRate: number;
  /** Share of all traffic sent by the hottest customer. */
  hotShare: number;
}

export const SEED_LOAD: LoadInput = {
  rate: 40,
  promptTokens: 8000,
  sharedTokens: 6000,
  prefixes: 200,
  outputTokens: 300,
  utilization: 0.65,
  batch: 64,
  hitRate: 0.9,
  hotShare: 0.1,
};

/** Below this shared fraction a hit saves too little for affinity to pay (the seed's "a fifth"). */
export const MIN_SHARED_FRACTION_FOR_AFFINITY = 0.2;

export interface FleetSize {
  prefillReplicaSeconds: number;
  replicas: number;
  gpus: number;
}

export interface RouterPlan {
  prefillUsPerToken: number;
  hitSavesMs: number;
  ttftColdMs: number;
  ttftWarmMs: number;
  kvPoolTokens: number;
  /** KV tokens the running batch's unshared parts occupy. */
  unsharedTokens: number;
  prefixesPerReplica: number;
  prefixSetTokens: number;
  prefixSetPools: number;
  /** Mean context of a decoding sequence: prompt plus half the output. */
  decodeContextTokens: number;
  weightBytesPerGpu: number;
  decodeStepMs: number;
  replicaDecodeTokensPerS: number;
  decodeReplicaSeconds: number;
  noAffinity: FleetSize;
  affinity: FleetSize & { hitRate: number };
  hotCustomer: {
    share: number;
    requestsPerS: number;
    replicaSecondsPerRequest: number;
    requestsPerReplica: number;
    replicasNeeded: number;
  };
  spill: { tokens: number; ms: number };
  sharedFraction: number;
  prefixSetFitsEveryPool: boolean;
  verdict: 'affinity' | 'least-queued';
}

/**
 * `prefillStepTokens`: tokens per prefill step (the engine's budget), which sets a calibrated
 * spec's prefill cost per token; the roofline's does not depend on it.
 */
export function planRouter(
  spec: ReplicaSpec,
  load: LoadInput,
  prefillStepTokens?: number,
): RouterPlan {
  const usPerToken = prefillUsPerToken(spec, prefillStepTokens);
  const uniqueTokens = load.promptTokens - load.sharedTokens;
  const poolTokens = kvPoolTokens(spec);
  const unsharedTokens = load.batch * (uniqueTokens + load.outputTokens / 2);
  const roomForPrefixes = poolTokens - unsharedTokens;
  const prefixesPerReplica =
    load.sharedTokens > 0 ? Math.max(0, Math.floor(roomForPrefixes / load.sharedTokens)) : 0;
  const prefixSetTokens = load.prefixes * load.sharedTokens;
  const decodeContextTokens = load.promptTokens + load.outputTokens / 2;
  const stepMs = decodeStepMs(spec, load.batch, decodeContextTokens);
  const replicaDecodeTokensPerS = load.batch / (stepMs / 1e3);
  const decodeReplicaSeconds = (load.rate * load.outputTokens) / replicaDecodeTokensPerS;

  const fleet = (prefillReplicaSeconds: number): FleetSize => {
    const replicas = Math.ceil((prefillReplicaSeconds + decodeReplicaSeconds) / load.utilization);
    return { prefillReplicaSeconds, replicas, gpus: replicas * spec.tp };
  };
  const coldPrefillS = load.promptTokens * usPerToken * 1e-6;
  const warmPrefillS = uniqueTokens * usPerToken * 1e-6;
  const affinityPrefillS = load.hitRate * warmPrefillS + (1 - load.hitRate) * coldPrefillS;

  const replicaSecondsPerRequest = warmPrefillS + load.outputTokens / replicaDecodeTokensPerS;
  const requestsPerReplica = load.utilization / replicaSecondsPerRequest;
  const hotRequestsPerS = load.rate * load.hotShare;

  const sharedFraction = load.sharedTokens / load.promptTokens;
  const prefixSetFitsEveryPool = prefixSetTokens <= roomForPrefixes;
  const affinityPays =
    sharedFraction >= MIN_SHARED_FRACTION_FOR_AFFINITY && !prefixSetFitsEveryPool;

  return {
    prefillUsPerToken: usPerToken,
    hitSavesMs: load.sharedTokens * usPerToken * 1e-3,
    ttftColdMs: coldPrefillS * 1e3,
    ttftWarmMs: warmPrefillS * 1e3,
    kvPoolTokens: poolTokens,
    unsharedTokens,
    prefixesPerReplica,
    prefixSetTokens,
    prefixSetPools: prefixSetTokens / poolTokens,
    decodeContextTokens,
    weightBytesPerGpu: weightBytes(spec) / spec.tp,
    decodeStepMs: stepMs,
    replicaDecodeTokensPerS,
    decodeReplicaSeconds,
    noAffinity: fleet(load.rate * coldPrefillS),
    affinity: { hitRate: load.hitRate, ...fleet(load.rate * affinityPrefillS) },
    hotCustomer: {
      share: load.hotShare,
      requestsPerS: hotRequestsPerS,
      replicaSecondsPerRequest,
      requestsPerReplica,
      replicasNeeded: hotRequestsPerS / requestsPerReplica,
    },
    // The owner keeps a request while its extra queue is under what the hit saves.
    spill: { tokens: load.sharedTokens, ms: load.sharedTokens * usPerToken * 1e-3 },
    sharedFraction,
    prefixSetFitsEveryPool,
    verdict: affinityPays ? 'affinity' : 'least-queued',
  };
}

const round = (x: number, digits: number): number => {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
};

/** `kvroute plan --json`: exactly the keys scripts depend on, at the seed's precision. */
export function routerPlanJson(p: RouterPlan) {
  return {
    prefillUsPerToken: round(p.prefillUsPerToken, 1),
    hitSavesMs: round(p.hitSavesMs, 0),
    ttftColdMs: round(p.ttftColdMs, 0),
    ttftWarmMs: round(p.ttftWarmMs, 0),
    kvPoolTokens: p.kvPoolTokens,
    prefixesPerReplica: p.prefixesPerReplica,
    prefixSetTokens: p.prefixSetTokens,
    prefixSetPools: round(p.prefixSetPools, 1),
    decodeStepMs: round(p.decodeStepMs, 1),
    replicaDecodeTokensPerS: Math.floor(p.replicaDecodeTokensPerS),
    decodeReplicaSeconds: round(p.decodeReplicaSeconds, 2),
    noAffinity: {
      prefillReplicaSeconds: round(p.noAffinity.prefillReplicaSeconds, 2),
      replicas: p.noAffinity.replicas,
      gpus: p.noAffinity.gpus,
    },
    affinity: {
      hitRate: p.affinity.hitRate,
      prefillReplicaSeconds: round(p.affinity.prefillReplicaSeconds, 2),
      replicas: p.affinity.replicas,
      gpus: p.affinity.gpus,
    },
    hotCustomer: {
      share: p.hotCustomer.share,
      replicaSecondsPerRequest: round(p.hotCustomer.replicaSecondsPerRequest, 2),
      replicasNeeded: round(p.hotCustomer.replicasNeeded, 1),
    },
    spill: { tokens: p.spill.tokens, ms: round(p.spill.ms, 0) },
    verdict: p.verdict,
  };
}

export interface SchedulerPlanInput {
  budgets: number[];
  promptTokens: number;
  /** Decodes running alongside the long prompt. */
  decodes: number;
}

export const SEED_SCHEDULER: SchedulerPlanInput = {
  budgets: [512, 2048, 8192],
  promptTokens: 32768,
  decodes: 64,
};

export interface SchedulerPlan {
  budgets: { budget: number; stepMs: number; stepsToFirstToken: number | null }[];
  decodeFloorMs: number;
}

/**
 * The scheduler seed's table: a full step of `budget` tokens at the spec's FLOP rate, the
 * weights-only decode floor, and steps until a long prompt's first token when `decodes` take one
 * budget token each (null when decodes leave no budget for prefill: the prompt never starts).
 */
export function planScheduler(spec: ReplicaSpec, input: SchedulerPlanInput): SchedulerPlan {
  return {
    budgets: input.budgets.map((budget) => {
      const prefillPerStep = budget - input.decodes;
      return {
        budget,
        stepMs: (budget * prefillUsPerToken(spec, budget)) / 1e3,
        stepsToFirstToken:
          prefillPerStep > 0 ? Math.ceil(input.promptTokens / prefillPerStep) : null,
      };
    }),
    decodeFloorMs: decodeStepMs(spec, 0, 0),
  };
}

export function schedulerPlanJson(p: SchedulerPlan) {
  return {
    budgets: p.budgets.map((b) => ({ ...b, stepMs: round(b.stepMs, 1) })),
    decodeFloorMs: round(p.decodeFloorMs, 1),
  };
}
