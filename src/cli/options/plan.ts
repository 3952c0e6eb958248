/**
 * `kvroute plan`'s options, one row each: its flag spec, the options of its `--help` and its
 * table in docs/configuration.md come from here. The fleet search (`plan --search-fleet`) has
 * its own table (`planFleet.ts`).
 */
import { DEFAULT_CPU_KV_GBPS } from '../../engine/connector/offloading.ts';
import { ENGINE_DEFAULTS } from '../../engine/options.ts';
import { DTYPES, GPUS, MODELS } from '../../model/catalog.ts';
import { SEED_LOAD, SEED_SCHEDULER } from '../../model/plan.ts';
import { SEED_PD } from '../../model/pdPlan.ts';
import { SEED_REPLICA } from '../../model/spec.ts';
import { bool, int, num, oneOf, options, str } from './table.ts';

export const PLAN_PRESETS = ['seed-router', 'seed-scheduler'] as const;

const L = SEED_LOAD;
const FRACTION = { above: 0, max: 1 } as const;

// biome-ignore format: one option a line
export const PLAN_OPTIONS = options({
  preset: oneOf(PLAN_PRESETS, 'P', '{values} (default {default}); seed-scheduler prints the budget table instead', { default: PLAN_PRESETS[0] }),
  model: str('NAME', `${Object.keys(MODELS).join(', ')} (default ${SEED_REPLICA.model})`),
  gpu: str('NAME', `${Object.keys(GPUS).join(', ')} (default ${SEED_REPLICA.gpu})`),
  tp: int('N', `GPUs per replica (default ${SEED_REPLICA.tp}; seed-scheduler 4)`, { above: 0 }),
  'weights-dtype': oneOf(DTYPES, 'D', `{values} (default ${SEED_REPLICA.weightsDtype})`),
  'kv-dtype': oneOf(DTYPES, 'D', `{values} (default ${SEED_REPLICA.kvDtype})`),
  rate: num('R', 'requests/s', { above: 0, default: L.rate }),
  'prompt-tokens': int('N', `prompt length (default {default}; seed-scheduler ${SEED_SCHEDULER.promptTokens})`, { above: 0, default: L.promptTokens }),
  'shared-tokens': int('N', 'shared prefix', { min: 0, default: L.sharedTokens }),
  prefixes: int('N', 'distinct prefixes', { above: 0, default: L.prefixes }),
  'output-tokens': int('N', 'output length', { above: 0, default: L.outputTokens }),
  // The router plan takes a batch above 0; the scheduler's budget table also takes 0 decodes.
  batch: int('N', `decode batch (default {default}; seed-scheduler ${SEED_SCHEDULER.decodes}, 0 allowed)`, { min: 0, default: L.batch }),
  mfu: num('F', `prefill MFU (default ${SEED_REPLICA.mfu}; seed-scheduler 1)`, FRACTION),
  mbu: num('F', `decode MBU (default ${SEED_REPLICA.mbu}; seed-scheduler 1)`, FRACTION),
  utilization: num('F', 'target utilization', { ...FRACTION, default: L.utilization }),
  'hit-rate': num('F', 'warm fraction under affinity', { min: 0, max: 1, default: L.hitRate }),
  'hot-share': num('F', "the hottest customer's share", { ...FRACTION, default: L.hotShare }),
  budgets: str('LIST', `seed-scheduler budgets (default ${SEED_SCHEDULER.budgets.join(',')})`),
  profile: str('FILE', 'calibrated cost model from kvroute calibrate instead of --mfu/--mbu'),
  budget: int('N', "tokens per prefill step, for a profile's MFU", { above: 0, default: ENGINE_DEFAULTS.budgetTokens, unit: 'tokens' }),
  pd: bool('the P/D split: prefill and decode demand apart, transfer bytes and link time, aggregated vs disaggregated counts, when disaggregation pays'),
  'transfer-gbps': num('F', '--pd: KV link, GB/s', { above: 0, default: SEED_PD.transferGbps, unit: 'GB/s' }),
  'transfer-latency-ms': num('F', '--pd: per transfer', { min: 0, default: SEED_PD.transferLatencyMs }),
  'tpot-slo-ms': num('F', '--pd: the TPOT target of the verdict', { above: 0, default: SEED_PD.tpotSloMs }),
  'cpu-kv-gib': num('G', 'a CPU tier of G GiB per replica: how many prefixes fit in the GPU and CPU tiers, and what reloading one costs (JSON: "tiers")', { above: 0, unit: 'GiB' }),
  'cpu-kv-gbps': num('F', 'host-to-GPU KV copy, GB/s (default {default}: PCIe 5.0 x16)', { above: 0, default: DEFAULT_CPU_KV_GBPS, unit: 'GB/s' }),
  json: bool('machine-readable output'),
  'search-fleet': bool('the cheapest fleet over GPUs x TP in the simulator (kvroute plan --search-fleet --help)'),
});
