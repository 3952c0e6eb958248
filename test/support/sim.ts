import { ENGINE_DEFAULTS } from '../../src/engine/options.ts';
import { DEFAULT_SLO } from '../../src/results/slo.ts';
import type { SimConfig } from '../../src/sim/run.ts';

/**
 * The seed's shape at a fifth of the rate on 5 replicas: the seed's load per replica and its
 * 200 prefixes (2.2 KV pools), long enough for each customer to come back a few times.
 */
export function smallSeedConfig(overrides: Partial<SimConfig> = {}, policy = 'cost'): SimConfig {
  return {
    workload: { kind: 'synthetic', name: 'seed', ratePerS: 8 },
    seed: 1,
    durationMs: 120_000,
    warmupMs: 40_000,
    replicas: 5,
    engine: ENGINE_DEFAULTS,
    router: { policy, index: 'events', queueSource: 'ledger' },
    view: { staleMs: 0, reportMs: 100, eventDelayMs: 0 },
    faults: [],
    slo: { ...DEFAULT_SLO },
    ...overrides,
  };
}

/** The result keys `kvroute sim --json` and `kvroute bench --json` promise to scripts. */
export const RESULT_JSON_KEYS = [
  'policy',
  'replicas',
  'ttftMs',
  'tpotMs',
  'hitRate',
  'completed',
  'errors',
] as const;

/** The keys of a `--requests-out` line of a completed request, in order (sim and bench alike). */
export const REQUEST_LINE_KEYS = [
  'id',
  'policy',
  'replicas',
  'customer',
  'arrivalMs',
  'replica',
  'promptTokens',
  'cachedTokens',
  'ttftMs',
  'tpotMs',
  'endMs',
] as const;
