/**
 * `kvroute plan --pd`: the router seed's arithmetic split between a prefill pool and a decode
 * pool (DistServe's question: how many of each), beside the aggregated fleet of the same load.
 *
 *   prefill demand   = rate x (hit x warm prefill + (1 - hit) x cold prefill)   replica-s/s
 *   decode demand    = rate x output tokens / (batch / decode step)              replica-s/s
 *   aggregated       = ceil((prefill + decode) / utilization)                    (the seed's 22)
 *   disaggregated    = ceil(prefill / utilization) + ceil(decode / utilization)
 *   transfer         = prompt tokens x KV bytes/token per request (the uncached part when the
 *                      decode pool caches the shared prefix too); link = latency + bytes / GB/s
 *
 * What disaggregation buys is TPOT: an aggregated replica's step that carries a prefill chunk
 * takes `mixedStepMs(budget)` (the scheduler seed's budget arithmetic), which every running
 * stream feels; a decode replica's steps are decode-only. What it costs: the link time on every
 * TTFT, and the idle capacity of rounding two pools up instead of one. Pure arithmetic.
 */
import {
  decodeStepMs,
  kvBytesPerToken,
  mixedStepMs,
  prefillUsPerToken,
  type ReplicaSpec,
} from './cost.ts';
import type { LoadInput } from './plan.ts';

export interface PdPlanInput {
  /** The engine's token budget per step (mixed steps carry up to budget - batch prompt tokens). */
  budgetTokens: number;
  /** Link bandwidth, GB/s, and latency per transfer, ms. */
  transferGbps: number;
  transferLatencyMs: number;
  /** The TPOT target the verdict is drawn against, ms. */
  tpotSloMs: number;
}

export const SEED_PD: PdPlanInput = {
  budgetTokens: 2048,
  transferGbps: 25,
  transferLatencyMs: 1,
  tpotSloMs: 40,
};

export interface PdPlan {
  prefillReplicaSeconds: number;
  decodeReplicaSeconds: number;
  transferBytesPerRequest: number;
  /** The uncached part only: the decode pool's own prefix cache holds the shared part. */
  transferBytesWarm: number;
  linkMs: number;
  linkMsWarm: number;
  aggregated: { replicas: number; gpus: number };
  disaggregated: { prefill: number; decode: number; gpus: number };
  /** Extra GPUs of rounding two pools up instead of one. */
  idleGpus: number;
  /** An aggregated replica's step carrying a full prefill chunk, and a decode-only step, ms. */
  mixedStepMs: number;
  decodeStepMs: number;
  /** Prompt tokens a step can carry before it is slower than the decode-only step (roofline). */
  freeChunkTokens: number;
  /** The largest budget whose mixed step meets the TPOT target (null: even decode-only misses). */
  budgetForTpot: number | null;
  /** Cold TTFT of an aggregated replica at that budget (the prompt in chunks), ms. */
  ttftAtTpotBudgetMs: number | null;
  verdict: 'disaggregate' | 'aggregate' | 'neither';
}

export function planPd(spec: ReplicaSpec, load: LoadInput, pd: PdPlanInput): PdPlan {
  const usPerToken = prefillUsPerToken(spec, pd.budgetTokens);
  const unique = load.promptTokens - load.sharedTokens;
  const coldS = load.promptTokens * usPerToken * 1e-6;
  const warmS = unique * usPerToken * 1e-6;
  const prefillReplicaSeconds = load.rate * (load.hitRate * warmS + (1 - load.hitRate) * coldS);
  const contextTokens = load.promptTokens + load.outputTokens / 2;
  const stepMs = decodeStepMs(spec, load.batch, contextTokens);
  const decodeReplicaSeconds = (load.rate * load.outputTokens) / (load.batch / (stepMs / 1e3));
  const kvBytes = kvBytesPerToken(spec.model, spec.kvDtype);
  const link = (tokens: number) =>
    pd.transferLatencyMs + (tokens * kvBytes) / (pd.transferGbps * 1e6);
  const aggregatedReplicas = Math.ceil(
    (prefillReplicaSeconds + decodeReplicaSeconds) / load.utilization,
  );
  const prefill = Math.ceil(prefillReplicaSeconds / load.utilization);
  const decode = Math.ceil(decodeReplicaSeconds / load.utilization);
  const mixed = (budget: number) =>
    mixedStepMs(spec, {
      prefillTokens: Math.max(0, budget - load.batch),
      decodeTokens: load.batch,
      kvTokensRead: load.batch * contextTokens,
    });
  let free = 0;
  while (free < 1 << 20 && mixed(load.batch + free + 1) <= stepMs + 1e-9) free++;
  let budgetForTpot: number | null = null;
  if (stepMs <= pd.tpotSloMs) {
    let lo = load.batch;
    let hi = 1 << 20;
    while (lo < hi) {
      const mid = Math.ceil((lo + hi) / 2);
      if (mixed(mid) <= pd.tpotSloMs) lo = mid;
      else hi = mid - 1;
    }
    budgetForTpot = lo;
  }
  const chunk = budgetForTpot === null ? 0 : budgetForTpot - load.batch;
  const ttftAtTpotBudgetMs =
    budgetForTpot === null || chunk <= 0
      ? null
      : Math.ceil(load.promptTokens / chunk) * mixed(budgetForTpot);
  const mixedMs = mixed(pd.budgetTokens);
  const verdict =
    stepMs > pd.tpotSloMs ? 'neither' : mixedMs > pd.tpotSloMs ? 'disaggregate' : 'aggregate';
  return {
    prefillReplicaSeconds,
    decodeReplicaSeconds,
    transferBytesPerRequest: load.promptTokens * kvBytes,
    transferBytesWarm: unique * kvBytes,
    linkMs: link(load.promptTokens),
    linkMsWarm: link(unique),
    aggregated: { replicas: aggregatedReplicas, gpus: aggregatedReplicas * spec.tp },
    disaggregated: { prefill, decode, gpus: (prefill + decode) * spec.tp },
    idleGpus: (prefill + decode - aggregatedReplicas) * spec.tp,
    mixedStepMs: mixedMs,
    decodeStepMs: stepMs,
    freeChunkTokens: free,
    budgetForTpot,
    ttftAtTpotBudgetMs,
    verdict,
  };
}
