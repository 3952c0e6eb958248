/**
 * `kvroute sim`'s router-view options: how late the router sees engine state (reports, KV
 * events), its index and queue sources, and how its approximate records forget. One row each:
 * sim's flag spec and `--help` come from here; sim.ts reads them with `readerOf`.
 */
import { APPROX_FORGET_MODES } from '../router/index/approxForgetting.ts';
import {
  DEFAULT_KV_THRESHOLD,
  DEFAULT_OVERLAY_TTL_MS,
  INDEX_MODES,
  QUEUE_SOURCES,
} from '../router/defaults.ts';
import { LORA_AWARE_POLICIES } from '../router/registry.ts';
import { bool, num, oneOf, options } from './options/table.ts';

/** How often a replica reports when `--report-ms` is not given. */
export const DEFAULT_SIM_REPORT_MS = 100;

const APPROX_FORGET_HELP =
  "{values}: how the approximate records forget (--index approx, and sglang's own tree); " +
  'default {default} (LRU at a capacity, every route); llmd: LRU of 31,250 16-token blocks per ' +
  'pod; sglang: 2^24 characters per worker, swept every 60 s; dynamo: 120 s TTL per block, 2^20 ' +
  "blocks pruned to 80 %; peer: each policy its own project's (llmd, sglang, dynamo; kvroute's " +
  'for the others)';

// biome-ignore format: one option a line
export const SIM_ROUTER_VIEW_OPTIONS = options({
  'stale-ms': num('MS', "engine reports reach the router this late (default 0: also after every step); the cost policy's queue term still comes from the ledger", { min: 0, section: 'router view' }),
  'report-ms': num('MS', 'every replica reports this often', { above: 0, default: DEFAULT_SIM_REPORT_MS }),
  'event-delay-ms': num('MS', "KV events reach the router's index this late", { min: 0, default: 0 }),
  index: oneOf(INDEX_MODES, 'M', 'prefix index feed: {values}', { default: INDEX_MODES[0] }),
  'queue-source': oneOf(QUEUE_SOURCES, 'S', "cost policy's queue term: {values}", { default: QUEUE_SOURCES[0] }),
  'kv-threshold': num('F', 'exclude replicas above this KV usage', { above: 0, max: 1, default: DEFAULT_KV_THRESHOLD }),
  'overlay-ttl-ms': num('MS', 'predict-on-route lifetime', { min: 0, default: DEFAULT_OVERLAY_TTL_MS }),
  'approx-forget': oneOf(APPROX_FORGET_MODES, 'M', APPROX_FORGET_HELP, { default: APPROX_FORGET_MODES[0] }),
  'lora-blind': bool(`also run each LoRA-aware policy (${LORA_AWARE_POLICIES.join(', ')}) as if adapters did not exist: no load term, no free-slot guard, no LoRA affinity (rows POLICY/lora-blind)`),
});
