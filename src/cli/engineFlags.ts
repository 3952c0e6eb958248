/**
 * The engine's flags, declared once for every command that starts or simulates engines
 * (`kvroute engine`, `kvroute sim`, `npm run demo`): the flag spec, the help lines and the
 * reader into the one engine options type, with the engine's own defaults: all derived from
 * one option table (`options/table.ts`).
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
import { type Flags, UsageError } from './args.ts';
import { type FieldRows, readFields } from './options/fields.ts';
import { helpOf } from './options/help.ts';
import { readerOf } from './options/read.ts';
import { specOf } from './options/spec.ts';
import { int, num, oneOf, options, str } from './options/table.ts';

const D = ENGINE_DEFAULTS;

/** The engine's options, one row each (`options/table.ts`). */
// biome-ignore format: one option a line
export const ENGINE_OPTIONS = options({
  model: oneOf(Object.keys(MODELS), 'NAME', '{values}', { default: D.model, section: 'engine (the same flags for kvroute engine, kvroute sim and npm run demo)' }),
  gpu: oneOf(Object.keys(GPUS), 'NAME', '{values}', { default: D.gpu }),
  tp: int('N', 'GPUs per replica', { above: 0, default: D.tp }),
  budget: int('N', 'tokens per step', { above: 0, default: D.budgetTokens, unit: 'tokens' }),
  'max-seqs': int('N', 'running sequences at most', { above: 0, default: D.maxSeqs }),
  'kv-policy': oneOf(KV_POLICY_NAMES, 'P', "{values} (default {default}: vLLM's; reserve: the scheduler seed's reserve-at-admission)", { default: D.kvPolicy }),
  'block-size': int('N', 'tokens per KV block', { above: 0, default: D.blockSize, unit: 'tokens' }),
  'kv-blocks': int('N', "KV pool size in blocks (default: the cost model's pool)", { above: 0, unit: 'blocks' }),
  profile: str('FILE', 'calibrated step times from kvroute calibrate (default: roofline)'),
  'max-loras': int('N', "LoRA adapters in one step at most (vLLM's; default {default})", { above: 0, default: DEFAULT_MAX_LORAS }),
  'max-cpu-loras': int('N', 'adapters kept resident, >= --max-loras (default: --max-loras)', { above: 0 }),
  'max-lora-rank': oneOf(LORA_RANKS.map((r) => String(r)), 'R', '{values} (default {default}); sizes an adapter', { default: DEFAULT_MAX_LORA_RANK }),
  'lora-load-gbps': num('F', 'storage read bandwidth of an adapter load, GB/s (default {default}: 84 ms for a rank-16 Llama 3.3 70B adapter)', { above: 0, default: DEFAULT_LORA_LOAD_GBPS, unit: 'GB/s' }),
  'cpu-kv-gib': num('G', "a CPU tier of G GiB of KV per replica (vLLM's OffloadingConnector, --kv-offloading-size): GPU evictions kept there, prefixes loaded back (default: none)", { above: 0, unit: 'GiB' }),
  'cpu-kv-gbps': num('F', 'host-to-GPU KV copy bandwidth, GB/s (default {default}: PCIe 5.0 x16)', { above: 0, default: DEFAULT_CPU_KV_GBPS, unit: 'GB/s' }),
});

/** The options whose value is a field of `EngineOptions` (its default in ENGINE_DEFAULTS). */
const ENGINE_FIELDS = {
  model: 'model',
  gpu: 'gpu',
  tp: 'tp',
  budgetTokens: 'budget',
  maxSeqs: 'max-seqs',
  kvPolicy: 'kv-policy',
  blockSize: 'block-size',
} as const satisfies FieldRows<typeof ENGINE_OPTIONS>;

export const ENGINE_FLAGS = specOf(ENGINE_OPTIONS);
export const ENGINE_HELP = helpOf(ENGINE_OPTIONS);

export function readEngineFlags(flags: Flags): EngineOptions {
  const option = readerOf(ENGINE_OPTIONS, flags);
  const engine: EngineOptions = {
    ...D,
    ...readFields<typeof ENGINE_OPTIONS, typeof ENGINE_FIELDS>(option, ENGINE_FIELDS),
  };
  const kvBlocks = option('kv-blocks');
  if (kvBlocks !== undefined) engine.kvBlocks = kvBlocks;
  const profile = readProfileFlag(flags, engine.tp);
  if (profile) engine.profile = profile;
  const lora = readLoraFlags(flags);
  if (lora) engine.lora = lora;
  const cpuKvGiB = option('cpu-kv-gib');
  if (cpuKvGiB !== undefined) engine.cpuKvGiB = cpuKvGiB;
  const cpuKvGbps = option('cpu-kv-gbps');
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
  const option = readerOf(ENGINE_OPTIONS, flags);
  const maxLoras = option('max-loras') ?? DEFAULT_MAX_LORAS;
  const maxCpuLoras = option('max-cpu-loras');
  if (maxCpuLoras !== undefined && maxCpuLoras < maxLoras) {
    throw new UsageError(
      `--max-cpu-loras: max_cpu_loras (${maxCpuLoras}) must be >= max_loras (${maxLoras})`,
    );
  }
  const rank = option('max-lora-rank');
  const loadGBps = option('lora-load-gbps');
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
  const path = readerOf(ENGINE_OPTIONS, flags)('profile');
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
