/**
 * The fleet search the `kvroute plan --search-fleet` tests share (test/model/plan.fleet.*.test.ts):
 * a GPU x TP grid over a tiny search (a few seconds of a slow workload), small enough to run in
 * each file that needs it.
 */
import { readPrices } from '../../src/cli/priceFlag.ts';
import { ENGINE_DEFAULTS } from '../../src/engine/options.ts';
import type { FleetSearchSpec } from '../../src/sim/fleetSearch.ts';
import type { SimConfig } from '../../src/sim/run.ts';

export const base: SimConfig = {
  workload: { kind: 'synthetic', name: 'seed', ratePerS: 2 },
  seed: 3,
  durationMs: 8_000,
  warmupMs: 1_000,
  replicas: 1,
  engine: { ...ENGINE_DEFAULTS },
  router: { policy: 'delay-cost', index: 'events', queueSource: 'ledger' },
  view: { staleMs: 0, reportMs: 100, eventDelayMs: 0 },
  faults: [],
  slo: { ttftP99Ms: 1000, tpotP99Ms: 100 },
};

export const spec: FleetSearchSpec = {
  base,
  gpus: ['h200', 'h100-sxm', 'a10g'],
  tps: [2, 8],
  dollarsPerGpuHour: readPrices(undefined),
  maxReplicas: 4,
  threads: 1,
};
