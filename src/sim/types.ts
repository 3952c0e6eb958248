/** The simulator's inputs and outputs as plain data (what the CLI, report and search share). */
import type { KvPolicyName } from '../engine/types.ts';
import type { PolicyOptions } from '../router/registry.ts';
import type { Percentiles } from './metrics.ts';

export interface SloTargets {
  ttftP99Ms: number;
  tpotP99Ms: number;
}

/** A replica dies at `atMs` (kill) or comes back cold (revive). */
export interface FaultSpec {
  kind: 'kill' | 'revive';
  replica: number;
  atMs: number;
}

export interface EngineOptions {
  model: string;
  gpu: string;
  tp: number;
  budgetTokens: number;
  maxSeqs: number;
  kvPolicy: KvPolicyName;
  blockSize: number;
}

export interface RouterOptions {
  policy: string;
  index: 'events' | 'approx';
  queueSource: 'ledger' | 'reports';
  /** Knobs for the policy's constructor (see the registry's PolicyOptions); defaults otherwise. */
  policyOptions?: PolicyOptions;
  kvThreshold?: number;
  /** The router's own report-age limit; default: comfortably above the simulated delay. */
  staleLimitMs?: number;
  overlayTtlMs?: number;
}

export interface ViewOptions {
  /** Engine reports reach the router this late (0: also after every step, immediately). */
  staleMs: number;
  /** Every replica reports this often (idle ones too, so none looks stale to the router). */
  reportMs: number;
  /** KV events reach the router's index this late. */
  eventDelayMs: number;
}

/** Summary of one fault for the report: what the dead replica's customers saw. */
export interface FaultImpact {
  kind: 'kill' | 'revive';
  replica: number;
  atMs: number;
  /** Customers whose prefix the replica held when it died. */
  /** Customers whose prefix only this replica held: they lose their cache. */
  customers: number;
  /** Customers whose prefix this replica held along with another replica. */
  sharedCustomers: number;
  rerouted: number;
  errors: number;
  /** Those customers' TTFT p50 in the minute before, on their first request after, and later. */
  ttftBeforeP50Ms: number;
  ttftFirstAfterP50Ms: number;
  ttftLaterP50Ms: number;
}

export interface PolicyResult {
  policy: string;
  replicas: number;
  workload: string;
  durationS: number;
  warmupS: number;
  ttftMs: Percentiles;
  tpotMs: Percentiles;
  itlMs: Percentiles;
  e2eMs: Percentiles;
  /** Cached prompt tokens / prompt tokens over measured requests. */
  hitRate: number;
  arrived: number;
  completed: number;
  /** Requests that did not complete: killed mid-stream, never fit, no replica, unfinished. */
  errors: number;
  errorsByKind: Record<string, number>;
  rerouted: number;
  utilization: { mean: number; min: number; max: number; perReplica: number[] };
  customers: {
    watched: number | null;
    watchedTtftMs: Percentiles | null;
    othersTtftMs: Percentiles | null;
    /** Spread of per-customer TTFT p99 over customers with at least 20 measured requests. */
    perCustomerTtftP99Ms: { customers: number; p50: number; max: number; worst: number } | null;
  };
  owners: {
    sampleMs: number;
    /** Replicas holding the watched customer's prefix, per sample. */
    watched: number[];
    /** Mean owners over all tracked prefixes, per sample. */
    meanAll: number[];
  };
  load: { bucketMs: number; perReplica: number[][] };
  /** TTFT CDF points [ms, fraction], downsampled. */
  ttftCdf: [number, number][];
  faults: FaultImpact[];
  slo: SloTargets;
  sloMet: boolean;
  /** The run stopped as soon as the SLO was certain to be missed (search probes). */
  stoppedEarly: boolean;
  engineSteps: number;
  events: number;
  /** The router's counters: decisions, spills, fail-opens, event batches... */
  router: Record<string, number>;
}

export interface SearchResult {
  policy: string;
  /** Fewest replicas that met the SLO; null when none up to the limit did. */
  minReplicas: number | null;
  probes: { replicas: number; sloMet: boolean; ttftP99Ms: number; tpotP99Ms: number }[];
}
