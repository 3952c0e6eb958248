/**
 * The online planner's search (a shell: it writes a file and starts worker threads): the window's
 * requests replayed as a trace (windowTrace.ts) through `kvroute sim --search`'s own pieces, the
 * sim CLI's flag reader for the engine, profile and SLO (`parseSimFlags`) and its replica search
 * on worker threads (`runBatch`, src/sim/parallel.ts), so the gateway's event loop keeps serving
 * while the probes run. No second search: the answer is the one `kvroute sim --trace FILE
 * --search` gives on the same trace and flags.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseSimFlags } from '../cli/sim.ts';
import { runBatch } from '../sim/parallel.ts';
import type { SimConfig } from '../sim/run.ts';
import type { Observation } from '../planner/online/window.ts';
import { warmupSOf, windowTrace } from '../planner/online/windowTrace.ts';

export interface WindowSearchOptions {
  /** `kvroute sim` flags for the engine and the SLO (`--profile FILE`, `--slo-ttft-p99-ms MS`). */
  simArgs: readonly string[];
  /** The routing policy the simulated fleet runs (the gateway's). */
  policy: string;
  maxReplicas: number;
  /** Worker threads (>= 2: the probes run off this thread). */
  threads: number;
  /** The search's first count (the count in force, else 1). */
  startReplicas: number;
}

export interface WindowSearchAnswer {
  /** Fewest replicas meeting the SLO on the window; null when none up to maxReplicas did. */
  minReplicas: number | null;
  /** Counts simulated. */
  probes: number;
}

export { warmupSOf } from '../planner/online/windowTrace.ts';

/** The sim config a window's search probes, its trace at `tracePath` (exported for tests). */
export function windowSimConfig(
  tracePath: string,
  spanMs: number,
  options: Pick<WindowSearchOptions, 'simArgs' | 'policy'>,
): SimConfig {
  const parsed = parseSimFlags([
    '--trace',
    tracePath,
    '--warmup',
    String(warmupSOf(spanMs)),
    ...options.simArgs,
  ]);
  if (parsed === 'help') throw new Error('the planner asked the sim flag reader for help');
  return { ...parsed.base, router: { ...parsed.base.router, policy: options.policy } };
}

export async function searchWindow(
  obs: readonly Observation[],
  options: WindowSearchOptions,
): Promise<WindowSearchAnswer> {
  if (obs.length === 0) return { minReplicas: null, probes: 0 };
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-planner-'));
  try {
    const path = join(dir, 'window.jsonl');
    writeFileSync(path, windowTrace(obs));
    const spanMs = obs[obs.length - 1]!.atMs - obs[0]!.atMs;
    const config = windowSimConfig(path, spanMs, options);
    const { search } = await runBatch({
      runs: [],
      searches: [{ label: options.policy, config }],
      bounds: { start: Math.max(1, options.startReplicas), max: options.maxReplicas },
      threads: options.threads,
    });
    const result = search[0]!;
    return { minReplicas: result.minReplicas, probes: result.probes.length };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
