/**
 * `kvroute sim`'s setup flags, named as vLLM names them: the weights' and KV cache's dtypes, the
 * memory fraction, and whose defaults the engine takes for what is not given (`--engine-defaults
 * vllm|sglang|kvroute`, src/engine/engineDefaults.ts).
 */
import {
  batchDefaults,
  ENGINE_DEFAULT_SETS,
  type EngineDefaultSet,
  memoryDefaults,
} from '../engine/engineDefaults.ts';
import type { EngineOptions } from '../engine/options.ts';
import type { Dtype } from '../model/catalog.ts';
import { kvPoolTokens, replicaSpecProblem } from '../model/cost.ts';
import { makeReplicaSpec } from '../model/spec.ts';
import { type Flags, flagSpec, UsageError } from './args.ts';

export const SIM_SETUP_FLAGS = flagSpec({
  string: 'dtype kv-cache-dtype quantization gpu-memory-utilization engine-defaults',
});

/** vLLM's --dtype names and ours; FP16 and BF16 cost the same (2 bytes, the same tensor FLOP/s). */
const WEIGHT_DTYPES = ['auto', 'bf16', 'bfloat16', 'fp16', 'float16', 'half', 'fp8'] as const;
/** vLLM's --kv-cache-dtype names and ours; `auto` is the model's dtype (BF16). */
const KV_DTYPES = ['auto', 'bf16', 'bfloat16', 'fp16', 'fp8', 'fp8_e4m3', 'fp8_e5m2'] as const;
const QUANTIZATIONS = ['fp8'] as const;

export const SIM_SETUP_HELP = `setup (vLLM's names)
  --engine-defaults E   ${ENGINE_DEFAULT_SETS.join('|')}: whose defaults fill what is not given
                        (default kvroute: FP8 weights, 0.92, budget 2048, 64 seqs); vllm: BF16,
                        0.9, 8192/1024 on >= 70 GiB GPUs but A100, else 2048/256; sglang: BF16,
                        mem_fraction_static 0.88 (TP 1), chunked prefill 2048/8192/16384 by
                        GPU memory, running requests from the pool, prefill and decode
                        batches apart, the overlap scheduler's delay, fcfs; sglang-v0.4: as
                        sglang, chunked prefill 2048/8192 (25,000 MB), lpm
  --dtype D             weights: ${WEIGHT_DTYPES.join(', ')} (auto: the model's, BF16)
  --quantization Q      ${QUANTIZATIONS.join(', ')}: FP8 weights (as --dtype fp8)
  --kv-cache-dtype D    ${KV_DTYPES.join(', ')} (default auto: BF16)
  --gpu-memory-utilization F  fraction of each GPU for weights and KV, (0, 1]
`;

/** The engine's options with the setup flags applied; `flags` also tells what was given. */
export function applySimSetup(flags: Flags, engine: EngineOptions): EngineOptions {
  const set: EngineDefaultSet = flags.oneOf('engine-defaults', ENGINE_DEFAULT_SETS) ?? 'kvroute';
  const dtype = flags.oneOf('dtype', WEIGHT_DTYPES);
  const quantization = flags.oneOf('quantization', QUANTIZATIONS);
  const kv = flags.oneOf('kv-cache-dtype', KV_DTYPES);
  const util = flags.fraction('gpu-memory-utilization');
  if (set === 'kvroute' && [dtype, quantization, kv, util].every((v) => v === undefined)) {
    return engine;
  }
  const mem = memoryDefaults(set, engine.tp);
  const weightsDtype: Dtype =
    quantization === 'fp8' || dtype === 'fp8'
      ? 'fp8'
      : dtype === undefined
        ? mem.weightsDtype
        : 'bf16';
  const kvDtype: Dtype = kv?.startsWith('fp8') ? 'fp8' : 'bf16';
  const out: EngineOptions = {
    ...engine,
    weightsDtype,
    kvDtype,
    memoryUtilization: util ?? mem.memoryUtilization,
    activationReserveBytes: mem.activationReserveBytes,
  };
  const spec = makeReplicaSpec({
    model: out.model,
    gpu: out.gpu,
    tp: out.tp,
    weightsDtype,
    kvDtype,
    memoryUtilization: out.memoryUtilization,
    activationReserveBytes: out.activationReserveBytes,
  });
  const problem = replicaSpecProblem(spec);
  if (problem) throw new UsageError(problem);
  const batch = batchDefaults(set, spec.gpu, spec.model, kvPoolTokens(spec));
  if (!flags.has('budget')) out.budgetTokens = batch.budgetTokens;
  if (!flags.has('max-seqs')) out.maxSeqs = batch.maxSeqs;
  if (batch.scheduling !== undefined) out.scheduling = batch.scheduling;
  return out;
}
