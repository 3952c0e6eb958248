/**
 * One simulation: a workload, a fleet of engine cores and one routing policy, on a virtual
 * clock. `simulate` builds the pieces from plain options, runs the fleet and summarizes it.
 */
import { EngineCore } from '../engine/core.ts';
import { type EngineOptions, makeEngineConfig } from '../engine/options.ts';
import { Fleet, type SimEngine, type SimRouter } from './fleet.ts';
import { makeSimRouter } from './routerAdapter.ts';
import { summarizeRun } from './summary.ts';
import { TraceWorkload } from './trace.ts';
import type { FaultSpec, PolicyResult, RouterOptions, SloTargets, ViewOptions } from './types.ts';
import { makeWorkload, type Workload, type WorkloadName } from './workloads.ts';

export type WorkloadSpec =
  | { kind: 'synthetic'; name: WorkloadName; ratePerS?: number }
  | { kind: 'trace'; path: string; rateScale: number };

export interface SimConfig {
  workload: WorkloadSpec;
  seed: number;
  /** Arrivals stop here; in-flight requests then drain. Traces: undefined = whole trace. */
  durationMs: number | undefined;
  warmupMs: number;
  replicas: number;
  engine: EngineOptions;
  router: RouterOptions;
  view: ViewOptions;
  faults: FaultSpec[];
  slo: SloTargets;
  /** Stop a run as soon as it cannot meet the SLO (replica-count search). */
  earlyStop?: boolean;
  onProgress?: (fraction: number) => void;
  /** Wraps the engines and the router (the benchmark times them this way). */
  instrument?: { engine?: (e: SimEngine) => SimEngine; router?: (r: SimRouter) => SimRouter };
}

/**
 * SLO defaults, sized for the router seed. TTFT p99 570 ms is one cold 8,000-token prefill on an
 * idle replica (8,000 x 71.3 us), and it is the promise of the seed's rule itself: a warm
 * request (143 ms) stays with its owner only while the extra queue is under the 428 ms its hit
 * saves, so no request should wait longer than starting cold on an idle replica. TPOT p99 of
 * 100 ms is three 33.5 ms decode steps, room for prefill chunks sharing steps with decodes but
 * not for a replica drowning in prefill.
 */
export const DEFAULT_SLO = { ttftP99Ms: 570, tpotP99Ms: 100 } as const;

export function buildWorkload(config: SimConfig): Workload {
  const w = config.workload;
  const blockSize = config.engine.blockSize;
  if (w.kind === 'trace') {
    return new TraceWorkload({
      path: w.path,
      seed: config.seed,
      blockSize,
      rateScale: w.rateScale,
      ...(config.durationMs !== undefined && { durationMs: config.durationMs }),
    });
  }
  return makeWorkload(w.name, {
    seed: config.seed,
    durationMs: config.durationMs ?? 600_000,
    blockSize,
    ...(w.ratePerS !== undefined && { ratePerS: w.ratePerS }),
  });
}

/** Arrivals in [0, duration) and of those, the measured ones (after warm-up). */
export function countArrivals(
  workload: Workload,
  warmupMs: number,
): { arrivals: number; measured: number; measuredTpot: number; lastMs: number } {
  let arrivals = 0;
  let measured = 0;
  let measuredTpot = 0;
  let lastMs = 0;
  const it = workload.arrivals();
  for (let a = it.next(); !a.done; a = it.next()) {
    arrivals++;
    lastMs = a.value.atMs;
    if (a.value.atMs >= warmupMs) {
      measured++;
      if (a.value.outputTokens > 1) measuredTpot++;
    }
  }
  return { arrivals, measured, measuredTpot, lastMs };
}

export function simulate(
  config: SimConfig,
  makeRouter: (c: SimConfig) => SimRouter = makeSimRouter,
): PolicyResult {
  const workload = buildWorkload(config);
  const engineConfig = makeEngineConfig(config.engine);
  const counts =
    config.earlyStop || config.durationMs === undefined
      ? countArrivals(workload, config.warmupMs)
      : undefined;
  const durationMs = config.durationMs ?? Math.ceil(counts!.lastMs + 1);
  const wrapEngine = config.instrument?.engine ?? ((e: SimEngine) => e);
  const wrapRouter = config.instrument?.router ?? ((r: SimRouter) => r);
  const sampleMs = Math.max(250, Math.round(durationMs / 400));
  const fleet = new Fleet({
    replicas: config.replicas,
    workload,
    router: wrapRouter(makeRouter(config)),
    makeEngine: () => wrapEngine(new EngineCore(engineConfig)),
    view: config.view,
    faults: config.faults,
    durationMs,
    warmupMs: config.warmupMs,
    ...(config.earlyStop &&
      counts && {
        earlyStop: {
          slo: config.slo,
          expectedMeasured: counts.measured,
          expectedMeasuredTpot: counts.measuredTpot,
        },
      }),
    sampleMs,
    loadBucketMs: Math.max(1000, Math.round(durationMs / 120 / 1000) * 1000),
    ...(config.onProgress && { onProgress: config.onProgress }),
  });
  const outcome = fleet.run();
  return summarizeRun(
    {
      policy: config.router.policy,
      replicas: config.replicas,
      workload: workload.name,
      durationMs,
      warmupMs: config.warmupMs,
      slo: config.slo,
      sampleMs,
    },
    outcome,
  );
}
