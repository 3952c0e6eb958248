/**
 * The one result type of a run, simulated (`kvroute sim`) or measured live by the load generator
 * (`kvroute bench`): the table, the HTML report, the replica search and both `--json` outputs
 * read it. What only a simulation knows (utilization, owners, faults, the router's counters) and
 * what only a live client knows (wall time, send lag) are optional: a run leaves out what it
 * cannot measure rather than filling it with NaN, and `--json` prints exactly what it has.
 */
import type { SloTargets } from './slo.ts';
import type { Percentiles } from './stats.ts';

export interface RunResult {
  /** The routing policy; a live run's --label, null when not given. */
  policy: string | null;
  /** Replicas behind the endpoint; null when a live run was not told. */
  replicas: number | null;
  workload: string;
  /** Workload seconds of arrivals; null when a live run had no duration (--requests alone). */
  durationS: number | null;
  warmupS: number;
  ttftMs: Percentiles;
  tpotMs: Percentiles;
  itlMs: Percentiles;
  e2eMs: Percentiles;
  /** Cached prompt tokens / prompt tokens over measured requests; null when not reported. */
  hitRate: number | null;
  arrived: number;
  completed: number;
  /** Requests that did not complete: killed mid-stream, never fit, no replica, refused... */
  errors: number;
  errorsByKind: Record<string, number>;
  /** TTFT CDF points [ms, fraction], downsampled (left out of --json). */
  ttftCdf: [number, number][];

  // Simulator only.
  rerouted?: number;
  utilization?: { mean: number; min: number; max: number; perReplica: number[] };
  customers?: {
    watched: number | null;
    watchedTtftMs: Percentiles | null;
    othersTtftMs: Percentiles | null;
    /** Spread of per-customer TTFT p99 over customers with at least 20 measured requests. */
    perCustomerTtftP99Ms: { customers: number; p50: number; max: number; worst: number } | null;
  };
  owners?: {
    sampleMs: number;
    /** Replicas holding the watched customer's prefix, per sample. */
    watched: number[];
    /** Mean owners over all tracked prefixes, per sample. */
    meanAll: number[];
  };
  /** Busy fraction per replica and time bucket (left out of --json). */
  load?: { bucketMs: number; perReplica: number[][] };
  faults?: FaultImpact[];
  slo?: SloTargets;
  sloMet?: boolean;
  /** The run stopped as soon as the SLO was certain to be missed (search probes). */
  stoppedEarly?: boolean;
  engineSteps?: number;
  events?: number;
  /** The router's counters: decisions, spills, fail-opens, event batches... */
  router?: Record<string, number>;
  /** `kvroute sim --routers`: router instances over the fleet and their sync delay (null: none). */
  gateways?: { routers: number; syncMs: number | null };
  /** `kvroute sim --max-queue-ms`: the bound (null: the unbounded run beside it) and goodput. */
  admission?: AdmissionResult;

  // Live only.
  /** Stopped by Ctrl-C while in flight (not errors). */
  cancelled?: number;
  /** Measured latencies were multiplied by this (the engines' --speedup). */
  speedup?: number;
  wallS?: number;
  /** How late requests left after their scheduled time, wall ms: large = client overloaded. */
  sendLagMs?: Percentiles;
  /** Requests whose prompt the server counted differently from the workload's length. */
  promptMismatches?: number;
}

type SimulatorKey =
  | 'rerouted'
  | 'utilization'
  | 'customers'
  | 'owners'
  | 'load'
  | 'faults'
  | 'slo'
  | 'sloMet'
  | 'stoppedEarly'
  | 'engineSteps'
  | 'events'
  | 'router';
type LiveKey = 'cancelled' | 'speedup' | 'wallS' | 'sendLagMs' | 'promptMismatches';

/** A simulator's result: every simulator field present, policy and replicas known. */
export type SimulatedRun = RunResult &
  Required<Pick<RunResult, SimulatorKey>> & { policy: string; replicas: number; hitRate: number };

/** A live run's result: every live field present. */
export type LiveRun = RunResult & Required<Pick<RunResult, LiveKey>>;

/** Summary of one fault for the report: what the dead replica's customers saw. */
export interface FaultImpact {
  kind: 'kill' | 'revive';
  replica: number;
  atMs: number;
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

export interface AdmissionResult {
  maxQueueMs: number | null;
  /** Measured arrivals refused by the bound (counted in `arrived`, not in `errors`). */
  rejected: number;
  /** Measured requests that met the SLO (TTFT and TPOT targets) per second of the window. */
  goodputRps: number;
  /** Measured arrivals per second. */
  offeredRps: number;
}

export interface SearchResult {
  policy: string;
  /** Fewest replicas that met the SLO; null when none up to the limit did. */
  minReplicas: number | null;
  probes: { replicas: number; sloMet: boolean; ttftP99Ms: number; tpotP99Ms: number }[];
}

/**
 * `{"results": [...], "search": [...]}` as `kvroute sim --json` and `kvroute bench --json` write
 * it (`search` only when given): per-replica load and the CDF left out, floats rounded to µs,
 * non-finite numbers written as null.
 */
export function resultsJson(
  results: readonly RunResult[],
  search?: readonly SearchResult[],
): string {
  const slim = results.map(({ load: _load, ttftCdf: _cdf, ...rest }) => rest);
  return JSON.stringify(
    search === undefined ? { results: slim } : { results: slim, search },
    jsonNumbers,
  );
}

function jsonNumbers(_key: string, value: unknown): unknown {
  if (typeof value !== 'number') return value;
  if (!Number.isFinite(value)) return null;
  return Number.isInteger(value) ? value : Math.round(value * 1000) / 1000;
}
