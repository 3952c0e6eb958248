/**
 * The one result type of a run, simulated (`kvroute sim`) or measured live by the load generator
 * (`kvroute bench`): the table, the HTML report, the replica search and both `--json` outputs
 * read it. What only a simulation knows (utilization, owners, faults, the router's counters) and
 * what only a live client knows (wall time, send lag) are optional: a run leaves out what it
 * cannot measure rather than filling it with NaN, and `--json` prints exactly what it has.
 */
import type { FlowResult } from './flowTable.ts';
import type { SloTargets } from './slo.ts';
import type { Percentiles } from './stats.ts';
import type { Timeline } from './timeline.ts';

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
  /**
   * TTFT / the request's own cold TTFT on an idle replica, per measured request: present only
   * when the run is judged by a slowdown SLO (`SloTargets.ttftSlowdown`).
   */
  ttftSlowdown?: Percentiles;
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
  /**
   * Per replica and time bucket (left out of --json): mean queued prompt tokens (routed there,
   * first token not back) and mean KV usage (0..1); NaN while the replica was down.
   */
  load?: { bucketMs: number; queuedPromptTokens: number[][]; kvUsage: number[][] };
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
  /** `kvroute sim --concurrency C`: the closed loop's throughput and goodput. */
  closedLoop?: ClosedLoopResult;
  /** `kvroute sim --max-queue-ms`: the bound (null: the unbounded run beside it) and goodput. */
  admission?: AdmissionResult;
  /** `kvroute sim --tenants`: per tenant, how arrivals ended and their TTFT and queue wait. */
  flow?: FlowResult;

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
  /** Requests bucketed by arrival time, for the report's charts (left out of --json). */
  timeline?: Timeline;
  /** The warm-fleet check on the first requests of new customers; null when not possible. */
  coldStart?: ColdStart | null;
}

/**
 * The first request of each customer is cold by design on a fresh fleet: of the first ones
 * (`requests`), how many found a tenth or more of their prompt cached, and whether that is more
 * than half (the fleet was warm before the run).
 */
export interface ColdStart {
  requests: number;
  cached: number;
  warm: boolean;
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
type LiveKey =
  | 'cancelled'
  | 'speedup'
  | 'wallS'
  | 'sendLagMs'
  | 'promptMismatches'
  | 'timeline'
  | 'coldStart'
  | 'slo'
  | 'sloMet';

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
  /** `--max-ttft-ms`: the TTFT bound at the chosen replica (null: the run without it). */
  maxTtftMs?: number | null;
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
  /** False when a count above `minReplicas` missed the SLO: one more replica can hurt. */
  monotone: boolean;
  /** Counts above `minReplicas` that missed (probed upward until two counts in a row met). */
  misses: number[];
  /** Why no count met the SLO; null when one did. */
  unmet: SearchUnmet | null;
  probes: SearchProbe[];
}

/** `kvroute sim --concurrency C`: the closed loop's throughput over the measured window. */
export interface ClosedLoopResult {
  concurrency: number;
  /** Requests that ended in the window, per second. */
  requestsPerS: number;
  outputTokensPerS: number;
  /** Of those, the ones meeting both SLO targets, per second. */
  goodputRps: number;
}

export interface SearchProbe {
  replicas: number;
  sloMet: boolean;
  /** Stopped once the SLO was certainly missed: the p99s cover the requests done by then. */
  stoppedEarly: boolean;
  ttftP99Ms: number;
  tpotP99Ms: number;
  /** With a slowdown SLO: p99 of TTFT / idle-replica TTFT. */
  ttftSlowdownP99?: number;
}

export interface SearchUnmet {
  /**
   * too-few-measured: under 100 measured requests, a p99 is their maximum; out-of-reach: more
   * measured requests than a p99 allows miss their TTFT limit even alone on a replica caching
   * every earlier prompt, so no count meets it; not-met: none up to `maxReplicas` did.
   */
  reason: 'too-few-measured' | 'out-of-reach' | 'not-met';
  /** Arrivals after the warm-up. */
  measured: number;
  /** Of those, requests out of reach (see `reason`). */
  outOfReach: number;
  maxReplicas: number;
}

/**
 * `{"results": [...], "search": [...]}` as `kvroute sim --json` and `kvroute bench --json` write
 * it (`search` only when given): per-replica load, the timeline and the CDF left out, floats rounded to µs,
 * non-finite numbers written as null.
 */
export function resultsJson(
  results: readonly RunResult[],
  search?: readonly SearchResult[],
): string {
  const slim = results.map(({ load: _load, ttftCdf: _cdf, timeline: _timeline, ...rest }) => rest);
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
