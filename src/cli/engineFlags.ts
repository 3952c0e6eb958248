/**
 * The engine's flags, declared once for every command that starts or simulates engines
 * (`kvroute engine`, `kvroute sim`, `npm run demo`): the flag spec, the help lines and the
 * reader into the one engine options type, with the engine's own defaults.
 */
import { readProfile } from '../calibrate/profileFile.ts';
import {
  DEFAULT_LORA_LOAD_GBPS,
  DEFAULT_MAX_LORA_RANK,
  DEFAULT_MAX_LORAS,
  LORA_RANKS,
  type LoraConfig,
} from '../engine/lora.ts';
import { DEFAULT_CPU_KV_GBPS } from '../engine/connector/offloading.ts';
import { ENGINE_DEFAULTS, type EngineOptions } from '../engine/options.ts';
import type { CostProfile } from '../model/calibration.ts';
import { GPUS, MODELS } from '../model/catalog.ts';
import { replicaSpecProblem } from '../model/cost.ts';
import { makeReplicaSpec } from '../model/spec.ts';
import { KV_POLICY_NAMES } from '../scheduler/types.ts';
import { type Flags, flagSpec, UsageError } from './args.ts';

export const ENGINE_FLAGS = flagSpec({
  string:
    'model gpu tp budget max-seqs kv-policy block-size kv-blocks profile ' +
    'max-loras max-cpu-loras max-lora-rank lora-load-gbps cpu-kv-gib cpu-kv-gbps',
});

const D = ENGINE_DEFAULTS;
export const ENGINE_HELP = `engine (the same flags for kvroute engine, kvroute sim and npm run demo)
  --model NAME          ${Object.keys(MODELS).join(', ')} (default ${D.model})
  --gpu NAME            ${Object.keys(GPUS).join(', ')} (default ${D.gpu})
  --tp N                GPUs per replica (default ${D.tp})
  --budget N            tokens per step (default ${D.budgetTokens})
  --max-seqs N          running sequences at most (default ${D.maxSeqs})
  --kv-policy P         ${KV_POLICY_NAMES.join(' | ')} (default ${D.kvPolicy}: vLLM's; reserve: the
                        scheduler seed's reserve-at-admission)
  --block-size N        tokens per KV block (default ${D.blockSize})
  --kv-blocks N         KV pool size in blocks (default: the cost model's pool)
  --profile FILE        calibrated step times from kvroute calibrate (default: roofline)
  --max-loras N         LoRA adapters in one step at most (vLLM's; default ${DEFAULT_MAX_LORAS})
  --max-cpu-loras N     adapters kept resident, >= --max-loras (default: --max-loras)
  --max-lora-rank R     ${LORA_RANKS.join(', ')} (default ${DEFAULT_MAX_LORA_RANK}); sizes an adapter
  --lora-load-gbps F    storage read bandwidth of an adapter load, GB/s (default
                        ${DEFAULT_LORA_LOAD_GBPS}: 84 ms for a rank-16 Llama 3.3 70B adapter)
  --cpu-kv-gib G        a CPU tier of G GiB of KV per replica (vLLM's OffloadingConnector,
                        --kv-offloading-size): GPU evictions kept there, prefixes loaded back
                        (default: none)
  --cpu-kv-gbps F       host-to-GPU KV copy bandwidth, GB/s (default ${DEFAULT_CPU_KV_GBPS}: PCIe 5.0 x16)
`;

export function readEngineFlags(flags: Flags): EngineOptions {
  const engine: EngineOptions = {
    model: flags.oneOf('model', Object.keys(MODELS)) ?? D.model,
    gpu: flags.oneOf('gpu', Object.keys(GPUS)) ?? D.gpu,
    tp: flags.positive('tp', true) ?? D.tp,
    budgetTokens: flags.positive('budget', true) ?? D.budgetTokens,
    maxSeqs: flags.positive('max-seqs', true) ?? D.maxSeqs,
    kvPolicy: flags.oneOf('kv-policy', KV_POLICY_NAMES) ?? D.kvPolicy,
    blockSize: flags.positive('block-size', true) ?? D.blockSize,
  };
  const kvBlocks = flags.positive('kv-blocks', true);
  if (kvBlocks !== undefined) engine.kvBlocks = kvBlocks;
  const profile = readProfileFlag(flags, engine.tp);
  if (profile) engine.profile = profile;
  const lora = readLoraFlags(flags);
  if (lora) engine.lora = lora;
  const cpuKvGiB = flags.positive('cpu-kv-gib');
  if (cpuKvGiB !== undefined) engine.cpuKvGiB = cpuKvGiB;
  const cpuKvGbps = flags.positive('cpu-kv-gbps');
  if (cpuKvGbps !== undefined) {
    if (cpuKvGiB === undefined) throw new UsageError('--cpu-kv-gbps needs --cpu-kv-gib G');
    engine.cpuKvGbps = cpuKvGbps;
  }
  const problem = replicaSpecProblem(
    makeReplicaSpec({ model: engine.model, gpu: engine.gpu, tp: engine.tp }),
  );
  if (problem) throw new UsageError(problem);
  return engine;
}

/** The LoRA limits, when any of their flags is given (vLLM's checks, naming the flag). */
function readLoraFlags(flags: Flags): LoraConfig | undefined {
  const names = ['max-loras', 'max-cpu-loras', 'max-lora-rank', 'lora-load-gbps'];
  if (!names.some((n) => flags.has(n))) return undefined;
  const maxLoras = flags.positive('max-loras', true) ?? DEFAULT_MAX_LORAS;
  const maxCpuLoras = flags.positive('max-cpu-loras', true);
  if (maxCpuLoras !== undefined && maxCpuLoras < maxLoras) {
    throw new UsageError(
      `--max-cpu-loras: max_cpu_loras (${maxCpuLoras}) must be >= max_loras (${maxLoras})`,
    );
  }
  const rank = flags.oneOf(
    'max-lora-rank',
    LORA_RANKS.map((r) => String(r)),
  );
  const loadGBps = flags.positive('lora-load-gbps');
  return {
    maxLoras,
    ...(maxCpuLoras !== undefined && { maxCpuLoras }),
    ...(rank !== undefined && { maxLoraRank: Number(rank) }),
    ...(loadGBps !== undefined && { loadGBps }),
  };
}

/**
 * `--profile FILE`, read and checked, with a curve for `tp`; a problem is one usage line naming
 * the flag. Shared by every command that takes the flag.
 */
export function readProfileFlag(flags: Flags, tp: number): CostProfile | undefined {
  const path = flags.string('profile');
  if (path === undefined) return undefined;
  let profile: CostProfile;
  try {
    profile = readProfile(path);
  } catch (err) {
    throw new UsageError(`--profile ${(err as Error).message}`);
  }
  const tps = profile.curves.map((c) => c.tp);
  if (!tps.includes(tp)) {
    throw new UsageError(
      `--profile ${path} has curves for TP ${tps.join(', ')}; none for --tp ${tp}`,
    );
  }
  return profile;
}
