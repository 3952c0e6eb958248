/**
 * The online planner's search inside a simulation (`kvroute sim --planner`): the window's
 * requests as a Mooncake trace (`windowTrace.ts`, what `serve --planner` writes), replayed with
 * `kvroute sim --search`'s own serial search (`searchMinReplicas`, `probeConfig`, the same
 * feasibility check) on the run's engine, router, view and SLO. The gateway's shell
 * (`src/serving/searchWindow.ts`) runs the same search on worker threads from the sim
 * CLI's flags; here it runs in the simulation's own thread, between two events, so the loop stays
 * a deterministic discrete-event simulation. The trace goes through a temporary file, as the
 * trace reader takes a path.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Observation } from '../planner/online/window.ts';
import { warmupSOf, windowTrace } from '../planner/online/windowTrace.ts';
import { diagnoseUnmet } from './feasibility.ts';
import { probeConfig } from './parallel.ts';
import { type SimConfig, simulate } from './run.ts';
import { searchMinReplicas } from './search.ts';
import type { SearchBounds } from './searchPlan.ts';

export interface LoopSearchAnswer {
  /** Fewest replicas meeting the SLO on the window; null when none up to the bound did. */
  minReplicas: number | null;
  /** Counts simulated. */
  probes: number;
}

/**
 * The run a window's search probes: the window's trace at `tracePath`, a warm-up of a fifth of
 * its span (at most 60 s, as the gateway's), and of `base` only what the gateway's search is
 * given (engine, router, view, SLO, seed): no tenants, bounds, faults or client limits.
 */
export function windowRunConfig(base: SimConfig, tracePath: string, spanMs: number): SimConfig {
  return {
    workload: { kind: 'trace', path: tracePath, rateScale: 1 },
    seed: base.seed,
    durationMs: undefined,
    warmupMs: warmupSOf(spanMs) * 1000,
    replicas: base.replicas,
    engine: base.engine,
    router: base.router,
    view: base.view,
    faults: [],
    slo: base.slo,
  };
}

/** The fewest replicas meeting `base`'s SLO on the window `obs` (oldest first). */
export function searchWindowInLoop(
  obs: readonly Observation[],
  base: SimConfig,
  bounds: SearchBounds,
): LoopSearchAnswer {
  if (obs.length === 0) return { minReplicas: null, probes: 0 };
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-sim-planner-'));
  try {
    const path = join(dir, 'window.jsonl');
    writeFileSync(path, windowTrace(obs));
    const config = windowRunConfig(base, path, obs[obs.length - 1]!.atMs - obs[0]!.atMs);
    const result = searchMinReplicas(config.router.policy, {
      start: Math.max(1, Math.min(bounds.start, bounds.max)),
      max: bounds.max,
      probe: (n) => simulate(probeConfig(config, n)),
      diagnose: () => diagnoseUnmet(config, bounds.max),
      slo: config.slo,
    });
    return { minReplicas: result.minReplicas, probes: result.probes.length };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
