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
import { type Flags, UsageError } from './args.ts';
import { readerOf } from './options/read.ts';
import { num, oneOf, options } from './options/table.ts';

/** vLLM's --dtype names and ours; FP16 and BF16 cost the same (2 bytes, the same tensor FLOP/s). */
const WEIGHT_DTYPES = ['auto', 'bf16', 'bfloat16', 'fp16', 'float16', 'half', 'fp8'] as const;
/** vLLM's --kv-cache-dtype names and ours; `auto` is the model's dtype (BF16). */
const KV_DTYPES = ['auto', 'bf16', 'bfloat16', 'fp16', 'fp8', 'fp8_e4m3', 'fp8_e5m2'] as const;
const QUANTIZATIONS = ['fp8'] as const;

const ENGINE_DEFAULTS_HELP =
  '{values}: whose defaults fill what is not given (default {default}: FP8 weights, 0.92, budget ' +
  '2048, 64 seqs); vllm: BF16, 0.9, 8192/1024 on >= 70 GiB GPUs but A100, else 2048/256; sglang: ' +
  'BF16, mem_fraction_static 0.88 (TP 1), chunked prefill 2048/8192/16384 by GPU memory, running ' +
  "requests from the pool, prefill and decode batches apart, the overlap scheduler's delay, fcfs; " +
  'sglang-v0.4: as sglang, chunked prefill 2048/8192 (25,000 MB), lpm';

/** The setup options, one row each (sim's flag spec, `--help` and docs come from here). */
// biome-ignore format: one option a line
export const SIM_SETUP_OPTIONS = options({
  'engine-defaults': oneOf(ENGINE_DEFAULT_SETS, 'E', ENGINE_DEFAULTS_HELP, { default: 'kvroute', section: "setup (vLLM's names)" }),
  dtype: oneOf(WEIGHT_DTYPES, 'D', "weights: {values} (auto: the model's, BF16)"),
  quantization: oneOf(QUANTIZATIONS, 'Q', '{values}: FP8 weights (as --dtype fp8)'),
  'kv-cache-dtype': oneOf(KV_DTYPES, 'D', '{values} (default {default}: BF16)', { default: 'auto' }),
  'gpu-memory-utilization': num('F', 'fraction of each GPU for weights and KV, (0, 1]', { above: 0, max: 1 }),
});

/** The engine's options with the setup flags applied; `flags` also tells what was given. */
export function applySimSetup(flags: Flags, engine: EngineOptions): EngineOptions {
  const option = readerOf(SIM_SETUP_OPTIONS, flags);
  const set: EngineDefaultSet = option('engine-defaults') ?? 'kvroute';
  const dtype = option('dtype');
  const quantization = option('quantization');
  const kv = option('kv-cache-dtype');
  const util = option('gpu-memory-utilization');
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
