/**
 * `kvroute plan --search-fleet`'s options (and `--merge-shards`'s), one row each: its flag spec,
 * the options of its `--help` and its table in docs/configuration.md come from here. The
 * workload flags (`../workloadFlags.ts`) are carried as a block of their module's spec and help.
 */
import { DEFAULT_TRANSFER_GBPS, DEFAULT_TRANSFER_LATENCY_MS } from '../../engine/connector/nixl.ts';
import { ENGINE_DEFAULTS } from '../../engine/options.ts';
import { GPUS, MODELS } from '../../model/catalog.ts';
import { DEFAULT_POLICY } from '../../router/defaults.ts';
import { WORKLOAD_FLAGS, workloadHelp } from '../workloadFlags.ts';
import { block, bool, int, num, oneOf, options, str } from './table.ts';

/** Seconds of arrivals per probe when --duration is not given: a grid is many searches. */
export const DEFAULT_FLEET_DURATION_S = 120;
export const DEFAULT_FLEET_TTFT_P99_MS = 1000;
export const DEFAULT_FLEET_TPOT_P99_MS = 100;
export const DEFAULT_FLEET_MAX_REPLICAS = 256;

const E = ENGINE_DEFAULTS;

const WORKLOAD_HELP = `workload
${workloadHelp({ duration: `${DEFAULT_FLEET_DURATION_S}`, warmup: 'min(60, duration/10)' })}`;

// biome-ignore format: one option a line
export const PLAN_FLEET_OPTIONS = options({
  'search-fleet': bool('search the grid (this mode of kvroute plan)'),
  gpus: str('LIST', `comma-separated: ${Object.keys(GPUS).join(', ')}`, { section: 'grid' }),
  tp: str('LIST', 'comma-separated TP degrees, e.g. 2,4,8'),
  model: oneOf(Object.keys(MODELS), 'NAME', '{values}', { default: E.model }),
  price: str('GPU=$/h,...', "over the catalog's list prices (each from a named, dated sheet)"),
  budget: int('N', "the engines' tokens per step", { above: 0, default: E.budgetTokens, unit: 'tokens' }),
  'max-seqs': int('N', "the engines' running sequences at most", { above: 0, default: E.maxSeqs }),
  'block-size': int('N', "the engines' tokens per KV block", { above: 0, default: E.blockSize, unit: 'tokens' }),
  workload: block(WORKLOAD_FLAGS, WORKLOAD_HELP),
  policy: str('P', 'routing policy', { default: DEFAULT_POLICY, section: 'SLO and search' }),
  'slo-ttft-p99-ms': num('MS', "the SLO's TTFT p99", { above: 0, default: DEFAULT_FLEET_TTFT_P99_MS }),
  'slo-tpot-p99-ms': num('MS', "the SLO's TPOT p99", { above: 0, default: DEFAULT_FLEET_TPOT_P99_MS }),
  'max-replicas': int('N', "each search's limit", { above: 0, default: DEFAULT_FLEET_MAX_REPLICAS }),
  pd: bool("search disaggregated fleets too: each GPU x TP also gets the P:D split search of kvroute sim --search --pd auto (its pools spared at twice the first estimate), priced at both pools' GPUs; the table and --json say each candidate's shape"),
  'transfer-gbps': num('F', '--pd: KV link, GB/s', { above: 0, default: DEFAULT_TRANSFER_GBPS, unit: 'GB/s' }),
  'transfer-latency-ms': num('F', '--pd: per transfer', { min: 0, default: DEFAULT_TRANSFER_LATENCY_MS }),
  threads: int('N', "worker threads (default: the machine's cores)", { min: 1 }),
  shard: str('i/n', 'run the i-th (0-based) of n disjoint slices of the grid and write its part (JSON) to --out FILE, or stdout', { section: 'past one machine' }),
  'merge-shards': str('LIST', 'the parts of all n shards: prints what the unsharded search prints'),
  out: str('FILE', 'write the output (a part, or the answer) to FILE, whole, instead of stdout'),
  json: bool('{"cheapest": {gpu, tp, replicas, dollarsPerHour}, "candidates": [...]}; with --pd, cheapest adds pd: {prefill, decode} (null: aggregated) and each candidate shape ("aggregated" or "disaggregated") and pd', { section: 'output' }),
  quiet: bool('no progress on stderr'),
});
