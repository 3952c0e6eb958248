/**
 * Live versus simulated: the same workload, engine options, replica count and policies, once
 * through `simulate` and once through a live stack (engines + gateway) measured by the bench
 * client. Live latencies are in workload ms (wall x speedup), so the two read alike.
 *
 * Alignment of the simulator with the live stack: the gateway learns engine state only by
 * scraping /metrics every `scrapeMs` of wall time, so the simulator gets periodic reports
 * (`reportMs = scrapeMs x speedup`) and no per-step ones (`staleMs` > 0); KV events over ZMQ
 * on loopback arrive within a millisecond (`eventDelayMs` 0); both routers draw from seed 1
 * (the gateway's default), so `random` picks the same replicas for the same arrivals.
 */
import type { LiveRun, SimulatedRun } from '../results/result.ts';
import { DEFAULT_SLO } from '../results/slo.ts';
import { type SimConfig, simulate } from '../sim/run.ts';
import { grid, n0 as ms, pct } from '../util/textTable.ts';
import type { WorkloadSpec } from '../workload/spec.ts';
import { runBench } from './run.ts';
import { type StackOptions, startStack } from './stack.ts';

/** The live side's stack options (one stack per policy) and the workload both sides run. */
export interface CompareOptions extends Omit<StackOptions, 'policy'> {
  workload: WorkloadSpec;
  seed: number;
  durationS: number;
  warmupS: number;
  policies: string[];
  signal?: AbortSignal;
  log?: (line: string) => void;
  /** Starts a task of the comparison (a simulation, a live run) whose progress is reported. */
  task?: (label: string) => { update(fraction: number, detail?: string): void; end(): void };
}

export interface CompareRow {
  policy: string;
  sim: SimulatedRun;
  live: LiveRun;
}

const DEFAULT_SCRAPE_MS = 100;

/** The arrivals both sides replay: same workload, seed, duration and warm-up. */
function arrivals(o: CompareOptions) {
  return {
    workload: o.workload,
    seed: o.seed,
    durationMs: o.durationS * 1000,
    warmupMs: o.warmupS * 1000,
  };
}

export function simConfigFor(o: CompareOptions, policy: string): SimConfig {
  const scrapeMs = o.scrapeMs ?? DEFAULT_SCRAPE_MS;
  return {
    ...arrivals(o),
    replicas: o.replicas,
    engine: o.engine,
    router: { policy, index: 'events', queueSource: 'ledger' },
    view: { staleMs: 1, reportMs: scrapeMs * o.speedup, eventDelayMs: 0 },
    faults: [],
    slo: { ...DEFAULT_SLO },
  };
}

export async function compareLiveSim(o: CompareOptions): Promise<CompareRow[]> {
  const log = o.log ?? (() => undefined);
  const rows: CompareRow[] = [];
  for (const policy of o.policies) {
    if (o.signal?.aborted) break;
    // Simulate first: it is synchronous and must not steal the event loop from live servers.
    const simTask = o.task?.(`${policy} simulated`);
    const sim = simulate({
      ...simConfigFor(o, policy),
      ...(simTask && { onProgress: (f: number) => simTask.update(f) }),
    });
    simTask?.end();
    log(`${policy}: simulated; starting ${o.replicas} engines + gateway (${o.mode})`);
    const stack = await startStack({
      replicas: o.replicas,
      policy,
      speedup: o.speedup,
      engine: o.engine,
      mode: o.mode,
      ...(o.scrapeMs !== undefined && { scrapeMs: o.scrapeMs }),
      real: o.real ?? null,
      ...(o.decodeCost && { decodeCost: o.decodeCost }),
    });
    let live: LiveRun;
    const liveTask = o.task?.(`${policy} live`);
    try {
      live = await runBench({
        url: stack.url,
        ...arrivals(o),
        speedup: o.speedup,
        concurrency: Number.POSITIVE_INFINITY,
        model: null,
        apiKey: null,
        label: policy,
        replicas: o.replicas,
        ...(o.signal && { signal: o.signal }),
        ...(liveTask && { onProgress: (f: number, detail: string) => liveTask.update(f, detail) }),
      });
    } finally {
      liveTask?.end();
      await stack.close();
    }
    log(`${policy}: live run done in ${live.wallS.toFixed(1)} s wall`);
    rows.push({ policy, sim, live });
  }
  return rows;
}

/**
 * The bench client's own lateness is the canary for a CPU-starved machine: when sends leave
 * late, so do the engines' steps and the gateway's forwarding.
 */
const STARVED_SHARE = 0.1;
function starved(r: CompareRow): boolean {
  return r.live.sendLagMs.p99 * r.live.speedup > STARVED_SHARE * r.sim.ttftMs.p50;
}

/** Relative difference of live from simulated (|live - sim| / sim). */
export function relDiff(sim: number, live: number): number {
  if (sim === 0) return live === 0 ? 0 : Number.POSITIVE_INFINITY;
  return Math.abs(live - sim) / Math.abs(sim);
}

export interface Agreement {
  ok: boolean;
  /** Metric by metric, what missed the tolerance. */
  misses: string[];
  simRanking: string[];
  liveRanking: string[];
}

/** Policies from best to worst by TTFT p99 (the SLO's metric), p50 breaking ties. */
export function ranking(results: { policy: string; p50: number; p99: number }[]): string[] {
  return [...results].sort((a, b) => a.p99 - b.p99 || a.p50 - b.p50).map((r) => r.policy);
}

/**
 * Whether live and simulated runs agree: TTFT p50/p99 and hit rate within `tolerance`
 * (relative), no live errors, same ranking. `hitRateSlack` (absolute, 0..1) also accepts hit
 * rates that close: a short run's hit rate moves by whole requests (one cold request in a
 * hundred moves it by most of a point), so a low rate has no room for a relative tolerance.
 */
export function agreement(rows: CompareRow[], tolerance = 0.15, hitRateSlack = 0): Agreement {
  const misses: string[] = [];
  for (const r of rows) {
    const check = (what: string, sim: number, live: number | null, slack = 0) => {
      const d = live === null ? Number.POSITIVE_INFINITY : relDiff(sim, live);
      if (!(d <= tolerance) && !(live !== null && Math.abs(live - sim) <= slack)) {
        misses.push(`${r.policy} ${what}: sim ${sim.toFixed(3)} live ${live?.toFixed(3)}`);
      }
    };
    check('TTFT p50', r.sim.ttftMs.p50, r.live.ttftMs.p50);
    check('TTFT p99', r.sim.ttftMs.p99, r.live.ttftMs.p99);
    check('hit rate', r.sim.hitRate, r.live.hitRate, hitRateSlack);
    if (r.live.errors > 0) misses.push(`${r.policy}: ${r.live.errors} live errors`);
  }
  const simRanking = ranking(
    rows.map((r) => ({ policy: r.policy, p50: r.sim.ttftMs.p50, p99: r.sim.ttftMs.p99 })),
  );
  const liveRanking = ranking(
    rows.map((r) => ({ policy: r.policy, p50: r.live.ttftMs.p50, p99: r.live.ttftMs.p99 })),
  );
  if (simRanking.join() !== liveRanking.join()) {
    misses.push(`ranking: sim ${simRanking.join(' < ')}, live ${liveRanking.join(' < ')}`);
  }
  return { ok: misses.length === 0, misses, simRanking, liveRanking };
}

export function formatCompare(rows: CompareRow[], tolerance = 0.15): string {
  const diff = (sim: number, live: number | null) =>
    live === null ? '–' : `${Math.round(relDiff(sim, live) * 100)}%`;
  const table = grid(
    [
      'policy',
      'TTFT p50 sim',
      'live',
      'diff',
      'TTFT p99 sim',
      'live',
      'diff',
      'hit sim',
      'live',
      'diff',
      'TPOT p50 sim',
      'live',
      'done sim',
      'live',
      'errors',
    ],
    rows.map((r) => [
      r.policy,
      ms(r.sim.ttftMs.p50),
      ms(r.live.ttftMs.p50),
      diff(r.sim.ttftMs.p50, r.live.ttftMs.p50),
      ms(r.sim.ttftMs.p99),
      ms(r.live.ttftMs.p99),
      diff(r.sim.ttftMs.p99, r.live.ttftMs.p99),
      pct(r.sim.hitRate),
      pct(r.live.hitRate),
      diff(r.sim.hitRate, r.live.hitRate),
      r.sim.tpotMs.p50.toFixed(1),
      r.live.tpotMs.p50.toFixed(1),
      String(r.sim.completed),
      String(r.live.completed),
      String(r.live.errors),
    ]),
  );
  const a = agreement(rows, tolerance);
  const lines = [
    table,
    'sim: kvroute sim on the same workload; live: measured through the gateway; diff: |live - sim| / sim; ' +
      'hit: prefix-cache hit rate; done: completed requests; errors: live errors',
    '',
    `ranking by TTFT p99: sim ${a.simRanking.join(' < ')}; live ${a.liveRanking.join(' < ')}`,
    `agreement means: for every policy, live TTFT p50, TTFT p99 and hit rate each within ${tolerance * 100}% of the simulated figure (diff), no live errors, and the same ranking`,
    a.ok
      ? `agreement: every TTFT p50/p99 and hit rate within ${tolerance * 100}%, same ranking`
      : `agreement: MISSED (${tolerance * 100}%): ${a.misses.join('; ')}`,
  ];
  for (const r of rows) {
    lines.push(
      `${r.policy}: live send lag p99 ${r.live.sendLagMs.p99.toFixed(1)} ms wall, ${r.live.wallS.toFixed(0)} s wall`,
    );
    if (starved(r)) {
      lines.push(
        `  warning: the client itself ran late (send lag p99 x speedup > ${STARVED_SHARE * 100}% of TTFT p50): the machine was short of CPU, and the live latencies include that`,
      );
    }
  }
  return lines.join('\n');
}
