/**
 * The engine's options as plain data, with their defaults: what `kvroute engine`, the simulator's
 * engines and the load generator's live stacks all start from, so one flag means one thing
 * everywhere. Defaults are the seeds' operating point: the router seed's replica (Llama 3.3 70B,
 * TP=2 H200), a 2,048-token budget, 64 sequences (the seed's decode batch), vLLM's paged KV.
 */
import type { CostProfile } from '../model/calibration.ts';
import type { Dtype } from '../model/catalog.ts';
import { kvBytesPerToken } from '../model/cost.ts';
import { makeReplicaSpec, SEED_REPLICA } from '../model/spec.ts';
import type { KvPolicyName } from '../scheduler/types.ts';
import type { EngineScheduling } from './engineDefaults.ts';
import type { LoraConfig } from './lora.ts';
import type { EngineConfig } from './types.ts';
import { definedFields } from '../util/definedFields.ts';

export interface EngineOptions {
  /** Catalog names and TP degree of one replica. */
  model: string;
  gpu: string;
  tp: number;
  /** Tokens one step may compute. */
  budgetTokens: number;
  maxSeqs: number;
  kvPolicy: KvPolicyName;
  /** Tokens per KV block (16, as vLLM). */
  blockSize: number;
  /** KV pool size in blocks; absent: the cost model's pool / blockSize. */
  kvBlocks?: number;
  /** Calibrated step-time coefficients (`kvroute calibrate`); absent: the roofline defaults. */
  profile?: CostProfile;
  /** Fraction of GPU memory the engine may use (vLLM's --gpu-memory-utilization); sizes the pool. */
  memoryUtilization?: number;
  /** Per GPU, kept out of the pool for activations (default 3 GB; SGLang's fraction excludes it). */
  activationReserveBytes?: number;
  /** Weights' and KV cache's dtypes (defaults FP8 weights, BF16 KV: the seed's replica). */
  weightsDtype?: Dtype;
  kvDtype?: Dtype;
  /** Automatic prefix caching (vLLM's --enable-prefix-caching; default on). */
  prefixCaching?: boolean;
  /**
   * LoRA limits (--max-loras, --max-cpu-loras, --max-lora-rank, --lora-load-gbps). The simulator
   * turns LoRA on with them; the engine server only with --enable-lora, as vLLM.
   */
  lora?: LoraConfig;
  /**
   * A CPU tier of this many GiB of KV per replica (vLLM's --kv-offloading-size: blocks =
   * GiB x 2^30 / (KV bytes per token x blockSize)), loaded back at `cpuKvGbps` GB/s (default
   * PCIe 5.0 x16); absent: no CPU tier.
   */
  cpuKvGiB?: number;
  cpuKvGbps?: number;
  /** How the scheduler forms steps (SGLang's under `--engine-defaults sglang`); absent: vLLM's. */
  scheduling?: EngineScheduling;
}

export const ENGINE_DEFAULTS = {
  model: SEED_REPLICA.model,
  gpu: SEED_REPLICA.gpu,
  tp: SEED_REPLICA.tp,
  budgetTokens: 2048,
  maxSeqs: 64,
  kvPolicy: 'paged',
  blockSize: 16,
} as const satisfies EngineOptions;

/** The engine core's config for these options (the replica spec from the catalog). */
export function makeEngineConfig(engine: EngineOptions): EngineConfig {
  const spec = makeReplicaSpec({
    model: engine.model,
    gpu: engine.gpu,
    tp: engine.tp,
    profile: engine.profile,
    memoryUtilization: engine.memoryUtilization,
    activationReserveBytes: engine.activationReserveBytes,
    weightsDtype: engine.weightsDtype,
    kvDtype: engine.kvDtype,
  });
  return {
    spec,
    budgetTokens: engine.budgetTokens,
    maxSeqs: engine.maxSeqs,
    kvPolicy: engine.kvPolicy,
    blockSize: engine.blockSize,
    ...definedFields({
      kvBlocks: engine.kvBlocks,
      prefixCaching: engine.prefixCaching,
      lora: engine.lora,
    }),
    ...engine.scheduling,
    ...(engine.cpuKvGiB !== undefined && {
      cpuOffload: {
        cpuBlocks: cpuBlocksOf(
          engine.cpuKvGiB,
          kvBytesPerToken(spec.model, spec.kvDtype),
          engine.blockSize,
        ),
        ...(engine.cpuKvGbps !== undefined && { cpuKvGbps: engine.cpuKvGbps }),
      },
    }),
  };
}

/** vLLM's CPUOffloadingSpec: `num_blocks = cpu_bytes_to_use // kv_bytes_per_offloaded_block`. */
export function cpuBlocksOf(gib: number, kvBytesPerToken: number, blockSize: number): number {
  return Math.floor((gib * 2 ** 30) / (kvBytesPerToken * blockSize));
}
