/**
 * `kvroute sim`'s options, one row each: its flag spec, the options of its `--help` and its
 * table in docs/configuration.md come from here. Its own rows (the fleet's size, faults, the
 * closed loop, published runs, output) sit among the groups other modules declare and read
 * (workload, engine, setup, router view, gateways, client, audit, P/D, SLO, tenants, planner).
 */
import { DEFAULT_POLICY } from '../../router/defaults.ts';
import { PUBLISHED_NAMES } from '../../sim/published/index.ts';
import type { WorkloadName } from '../../workload/workloads.ts';
import { ENGINE_OPTIONS } from '../engineFlags.ts';
import { FLEET_OPTIONS } from '../fleetFlag.ts';
import { LLMD_SCORER_OPTIONS } from '../llmdScorerFlags.ts';
import { POLICY_LIST_TEXT } from '../policyList.ts';
import { REQUESTS_OUT_TEXT } from '../requestsOut.ts';
import { ROUTER_SETUPS_OPTIONS } from '../routerSetups.ts';
import { SIM_AUDIT_OPTIONS } from '../simAudit.ts';
import { SIM_LOAD_OPTIONS } from '../simLoadFlags.ts';
import { SIM_PD_OPTIONS } from '../simPd.ts';
import { SIM_PLANNER_OPTIONS } from '../simPlannerFlags.ts';
import { SIM_ROUTER_VIEW_OPTIONS } from '../simRouterViewFlags.ts';
import { SIM_SETUP_OPTIONS } from '../simSetupFlags.ts';
import { SIM_SLO_OPTIONS } from '../simSloFlags.ts';
import { SIM_TENANT_OPTIONS } from '../simTenantFlags.ts';
import { workloadOptions } from '../workloadFlags.ts';
import { bool, int, list, oneOf, options, str } from './table.ts';

/** Replicas per workload when --replicas is not given (the seed's sizing with affinity). */
export const DEFAULT_SIM_REPLICAS: Record<WorkloadName | 'trace', number> = {
  seed: 22,
  hot: 22,
  'low-shared': 40,
  groups: 8,
  multiturn: 8,
  lora: 22,
  'shared-prefix': 2,
  chat: 8,
  trace: 8,
};

/** Seconds of arrivals when --duration is not given (a synthetic workload, open loop). */
export const DEFAULT_SIM_DURATION_S = 600;

const KILL_HELP =
  'replica R (0..replicas-1) dies at S seconds, within the arrivals (repeatable): requests ' +
  'without a token are re-routed, streaming ones count as errors';
const CONCURRENCY_HELP =
  "keep C requests in flight (as vLLM's bench serve --max-concurrency, inference-perf and " +
  "guidellm do): the workload's prompts in its order, each end starting the next, until " +
  '--duration; prints output tokens/s and goodput (requests meeting the SLO per second) over ' +
  'the requests ending between --warmup and --duration';
const PUBLISHED_HELP =
  '{values}: the published setup (src/sim/published/), its cache-blind and cache-aware ' +
  "policies simulated, the published figures (hit rates and token/s, or the harness's " +
  'throughput and TTFT) and gains beside the simulated ones (with --json and --quiet only)';

// biome-ignore format: one option a line
export const SIM_OPTIONS = options({
  ...workloadOptions({ duration: `${DEFAULT_SIM_DURATION_S}; trace: whole trace`, warmup: 'min(60, duration/10)', seed: 'workload and router seed', section: 'workload' }),
  policy: str('LIST', POLICY_LIST_TEXT, { default: DEFAULT_POLICY, section: 'fleet' }),
  replicas: int('N', 'default: seed/hot/lora 22, low-shared 40, shared-prefix 2, else 8', { above: 0 }),
  ...FLEET_OPTIONS,
  ...ENGINE_OPTIONS,
  ...SIM_SETUP_OPTIONS,
  ...SIM_ROUTER_VIEW_OPTIONS,
  ...LLMD_SCORER_OPTIONS,
  ...ROUTER_SETUPS_OPTIONS,
  ...SIM_LOAD_OPTIONS,
  kill: list('R@S', KILL_HELP, { section: 'faults' }),
  revive: list('R@S', 'replica R comes back, cold, at S seconds, after a --kill of it (repeatable); a killed replica without --revive stays down'),
  concurrency: int('C', CONCURRENCY_HELP, { above: 0, section: 'closed loop' }),
  ...SIM_AUDIT_OPTIONS,
  ...SIM_PD_OPTIONS,
  ...SIM_SLO_OPTIONS,
  ...SIM_TENANT_OPTIONS,
  ...SIM_PLANNER_OPTIONS,
  'replay-published': oneOf(PUBLISHED_NAMES, 'NAME', PUBLISHED_HELP, { section: 'published runs' }),
  json: bool('{"results": [...], "search": [...]}', { section: 'output' }),
  report: str('FILE.html', 'self-contained HTML report with SVG charts'),
  'requests-out': str('FILE.jsonl', `${REQUESTS_OUT_TEXT} of every run (not the search's probes), warm-up included`),
  quiet: bool('no progress (a bar on a TTY, else a line to stderr every ~10 s)'),
});
