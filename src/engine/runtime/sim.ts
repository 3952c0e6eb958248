/**
 * The sim runtime: a planned step "runs" for the cost model's mixed-step time, plus the load time
 * of the LoRA adapters it had to bring in. No compute, no tokens: the engine server's simulated
 * model (server/textGen.ts) writes the text.
 */
import { mixedStepMs, type ReplicaSpec } from '../../model/cost.ts';
import type { StepPlan } from '../../scheduler/types.ts';

/** Modelled duration of one planned step, in ms. */
export function simStepMs(
  spec: ReplicaSpec,
  plan: StepPlan & { promptSamples?: number },
  loraLoadMs: number,
): number {
  return mixedStepMs(spec, plan) + loraLoadMs;
}
