/** `kvroute plan --pd`: the P/D split of the router seed's load (model/pdPlan.ts), as text or JSON. */
import type { ReplicaSpec } from '../model/cost.ts';
import type { LoadInput } from '../model/plan.ts';
import type { PdPlan, PdPlanInput } from '../model/pdPlan.ts';

const fmt = (x: number, digits = 0): string =>
  x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
const round = (x: number, digits: number) => Math.round(x * 10 ** digits) / 10 ** digits;

export function pdPlanText(spec: ReplicaSpec, load: LoadInput, pd: PdPlanInput, p: PdPlan): string {
  const gb = (b: number) => `${fmt(b / 1e9, 2)} GB`;
  const lines = [
    `Disaggregated prefill and decode: ${fmt(load.rate)} req/s, ${fmt(load.promptTokens)}-token prompts (${fmt(load.sharedTokens)} shared, ${fmt(load.hitRate * 100)}% warm), ${fmt(load.outputTokens)} output tokens, batch ${fmt(load.batch)}, TP=${spec.tp} replicas`,
    '',
    `prefill demand    = ${fmt(p.prefillReplicaSeconds, 2)} replica-seconds per second (the prefill pool, cache-aware)`,
    `decode demand     = ${fmt(p.decodeReplicaSeconds, 2)} replica-seconds per second (the decode pool)`,
    `transfer          = ${fmt(load.promptTokens)} tokens x KV bytes/token = ${gb(p.transferBytesPerRequest)} per request; ${fmt(p.linkMs, 1)} ms at ${fmt(pd.transferGbps)} GB/s + ${fmt(pd.transferLatencyMs)} ms`,
    `                    (${gb(p.transferBytesWarm)}, ${fmt(p.linkMsWarm, 1)} ms, when the decode replica caches the shared prefix too)`,
    `aggregated        = ceil(${fmt(p.prefillReplicaSeconds + p.decodeReplicaSeconds, 2)} / ${fmt(load.utilization, 2)}) = ${p.aggregated.replicas} replicas, ${p.aggregated.gpus} GPUs`,
    `disaggregated     = ${p.disaggregated.prefill} prefill + ${p.disaggregated.decode} decode = ${p.disaggregated.prefill + p.disaggregated.decode} replicas, ${p.disaggregated.gpus} GPUs (${p.idleGpus >= 0 ? '+' : ''}${p.idleGpus} GPUs of rounding two pools)`,
    '',
    `TPOT: decode-only step ${fmt(p.decodeStepMs, 1)} ms; a step carrying a ${fmt(pd.budgetTokens)}-token budget's chunk ${fmt(p.mixedStepMs, 1)} ms`,
    `      a step carries ${fmt(p.freeChunkTokens)} prompt tokens before it is slower than decode-only (compute hides under the memory-bound step)`,
    p.budgetForTpot === null
      ? `      at TPOT ${fmt(pd.tpotSloMs)} ms even the decode-only step misses: a smaller batch is needed in either fleet`
      : `      at TPOT ${fmt(pd.tpotSloMs)} ms an aggregated replica needs a budget <= ${fmt(p.budgetForTpot)}: a cold prompt's TTFT is then ${fmt(p.ttftAtTpotBudgetMs ?? 0)} ms in chunks`,
    '',
    verdictLine(pd, p),
  ];
  return lines.join('\n');
}

function verdictLine(pd: PdPlanInput, p: PdPlan): string {
  if (p.verdict === 'neither') {
    return `Verdict: neither fleet meets TPOT ${fmt(pd.tpotSloMs)} ms at this batch; lower the batch first.`;
  }
  if (p.verdict === 'aggregate') {
    return `Verdict: aggregate. At budget ${fmt(pd.budgetTokens)} mixed steps already meet TPOT ${fmt(pd.tpotSloMs)} ms; disaggregating adds ${fmt(p.linkMs, 0)} ms of link to every TTFT and ${p.idleGpus} GPUs of rounding.`;
  }
  return `Verdict: disaggregate, or lower the aggregated budget. Mixed steps (${fmt(p.mixedStepMs, 0)} ms) break TPOT ${fmt(pd.tpotSloMs)} ms; a decode pool keeps ${fmt(p.decodeStepMs, 1)} ms for ${fmt(p.linkMs, 0)} ms of link per TTFT and ${p.idleGpus} GPUs of rounding. Disaggregation pays while the link time fits the TTFT slack and the budget an aggregated replica would need (${p.budgetForTpot === null ? '-' : fmt(p.budgetForTpot)}) stretches cold prefills past the TTFT target.`;
}

export function pdPlanJson(p: PdPlan) {
  return {
    prefillReplicaSeconds: round(p.prefillReplicaSeconds, 2),
    decodeReplicaSeconds: round(p.decodeReplicaSeconds, 2),
    transferBytesPerRequest: p.transferBytesPerRequest,
    transferBytesWarm: p.transferBytesWarm,
    linkMs: round(p.linkMs, 1),
    linkMsWarm: round(p.linkMsWarm, 1),
    aggregated: p.aggregated,
    disaggregated: p.disaggregated,
    idleGpus: p.idleGpus,
    mixedStepMs: round(p.mixedStepMs, 1),
    decodeStepMs: round(p.decodeStepMs, 1),
    freeChunkTokens: p.freeChunkTokens,
    budgetForTpot: p.budgetForTpot,
    ttftAtTpotBudgetMs: p.ttftAtTpotBudgetMs === null ? null : round(p.ttftAtTpotBudgetMs, 0),
    verdict: p.verdict,
  };
}
