/**
 * What an engine picks for itself when a flag is not given: the step's token budget, the running
 * sequences at most, the memory fraction and the activation memory kept out of the KV pool, and
 * the weights' dtype. `kvroute` is this project's own operating point (the seeds'); `vllm` and
 * `sglang` are those projects' defaults for the same GPU, so a published run can be set up as
 * its authors launched it.
 *
 * vLLM (`vllm/engine/arg_utils.py`, `EngineArgs.get_batch_defaults`, OpenAI server context):
 * 8,192 tokens and 1,024 sequences on a GPU with >= 70 GiB that is not an A100, else 2,048 and
 * 256; `gpu_memory_utilization` 0.9 of the whole GPU, weights and the profiled activation
 * included.
 *
 * SGLang (`python/sglang/srt/server_args.py`, `model_executor/model_runner.py`):
 * `chunked_prefill_size` 2,048 under 35 GiB, 8,192 under 160 GiB, else 16,384;
 * `mem_fraction_static` 0.88 at TP 1 (0.87 TP 2, 0.85 TP 4, 0.81 TP 8), weights and KV only,
 * activations outside it; `max_running_requests` = min(pool / 2, clamp(pool / context length x
 * 512, 2,048, 4,096)). Its scheduler, today as in v0.4 (`disable_overlap_schedule` and
 * `enable_mixed_chunk` both False): prefill and decode batches apart, prefill first
 * (`get_next_batch_to_run`, python/sglang/srt/managers/scheduler.py), and the overlap scheduler's
 * one-batch delay before a prefilled prompt enters the radix cache (`event_loop_overlap`); its
 * waiting list first come first served (`schedule_policy` "fcfs" today).
 *
 * `sglang-v0.4`: SGLang as the v0.4 series shipped it (python/sglang/srt/server_args.py of that
 * series): the same memory fractions and scheduler, `chunked_prefill_size` 2,048 under
 * 25,000 MB of GPU memory, else 8,192, and `schedule_policy` "lpm" (longest prefix match).
 */
import type { Dtype, GpuSpec, ModelSpec } from '../model/catalog.ts';
import type { SchedulerConfig } from '../scheduler/types.ts';

export const ENGINE_DEFAULT_SETS = ['kvroute', 'vllm', 'sglang', 'sglang-v0.4'] as const;
export type EngineDefaultSet = (typeof ENGINE_DEFAULT_SETS)[number];

const GIB = 2 ** 30;

/** What an engine sizes before it knows its pool. */
export interface EngineMemoryDefaults {
  memoryUtilization: number;
  /** Per GPU, kept out of the pool for activations and CUDA graphs. */
  activationReserveBytes: number;
  /** The weights' dtype when none is given. */
  weightsDtype: Dtype;
}

/** How the engine's scheduler forms its steps (absent: kvroute's own, vLLM's shape). */
export type EngineScheduling = Pick<
  SchedulerConfig,
  'batchShape' | 'schedulePolicy' | 'deferPrefixInsert'
>;

/** The engine's step limits once its pool is known. */
export interface EngineBatchDefaults {
  budgetTokens: number;
  maxSeqs: number;
  scheduling?: EngineScheduling;
}

/** SGLang's scheduler with its default policy (see the file's comment). */
export function sglangScheduling(schedulePolicy: 'fcfs' | 'lpm'): EngineScheduling {
  return { batchShape: 'prefill-first', schedulePolicy, deferPrefixInsert: true };
}

/** kvroute's own (src/model/cost.ts, src/engine/options.ts): FP8 weights, 0.92, 3 GB. */
export const KVROUTE_MEMORY: EngineMemoryDefaults = {
  memoryUtilization: 0.92,
  activationReserveBytes: 3e9,
  weightsDtype: 'fp8',
};

export function memoryDefaults(set: EngineDefaultSet, tp: number): EngineMemoryDefaults {
  switch (set) {
    case 'kvroute':
      return KVROUTE_MEMORY;
    case 'vllm':
      // vLLM profiles a forward pass of the full budget; 3 GB per GPU stands for it and the graphs.
      return { memoryUtilization: 0.9, activationReserveBytes: 3e9, weightsDtype: 'bf16' };
    case 'sglang':
    case 'sglang-v0.4':
      return {
        memoryUtilization: tp >= 8 ? 0.81 : tp >= 4 ? 0.85 : tp >= 2 ? 0.87 : 0.88,
        activationReserveBytes: 0,
        weightsDtype: 'bf16',
      };
  }
}

export function batchDefaults(
  set: EngineDefaultSet,
  gpu: GpuSpec,
  model: ModelSpec,
  poolTokens: number,
): EngineBatchDefaults {
  switch (set) {
    case 'kvroute':
      return { budgetTokens: 2048, maxSeqs: 64 };
    case 'vllm': {
      const large = gpu.hbmBytes >= 70 * GIB && !gpu.name.startsWith('a100');
      return large ? { budgetTokens: 8192, maxSeqs: 1024 } : { budgetTokens: 2048, maxSeqs: 256 };
    }
    case 'sglang': {
      const gib = gpu.hbmBytes / GIB;
      const budgetTokens = gib < 35 ? 2048 : gib < 160 ? 8192 : 16384;
      const scheduling = sglangScheduling('fcfs');
      return { budgetTokens, maxSeqs: sglangMaxRunning(model, poolTokens), scheduling };
    }
    case 'sglang-v0.4': {
      // get_nvgpu_memory_capacity() is in MiB: "gpu_mem < 25_000" -> chunked_prefill_size 2048.
      const budgetTokens = gpu.hbmBytes / 2 ** 20 < 25_000 ? 2048 : 8192;
      const scheduling = sglangScheduling('lpm');
      return { budgetTokens, maxSeqs: sglangMaxRunning(model, poolTokens), scheduling };
    }
  }
}

/** max_running_requests = min(pool / 2, clamp(pool / context length x 512, 2,048, 4,096)). */
function sglangMaxRunning(model: ModelSpec, poolTokens: number): number {
  const perContext = Math.floor((poolTokens / model.maxModelLen) * 512);
  const reqSlots = Math.min(Math.max(perContext, 2048), 4096);
  return Math.max(1, Math.min(Math.floor(poolTokens / 2), reqSlots));
}
