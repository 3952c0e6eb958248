/**
 * What a CPU tier costs the fleet simulator. `npm run bench:sim-tier [-- --json]
 * [-- --duration S] [-- --cpu-kv-gib G] [-- --replicas N]`. The router seed's workload at
 * 40 req/s on 8 replicas (seed model and GPU), policy cost, simulated with and without a CPU
 * tier of G GiB per replica (default 100: about 20,000 blocks, which fill within the first
 * minute and then evict for the rest of the run), runs alternated in one process. Prints each
 * side's median wall time over BENCH_RUNS runs (default 3) and tierRatio = median(tier) /
 * median(no tier); the target is at most 1.5. tierCpuRatio is the same for the process's CPU
 * time (user + system), which a machine shared with other work disturbs less than wall time.
 * Runs of one side give identical results.
 */
import { ENGINE_DEFAULTS, type EngineOptions } from '../src/engine/options.ts';
import { DEFAULT_SLO } from '../src/results/slo.ts';
import type { SimEngine } from '../src/sim/fleet.ts';
import { simulate } from '../src/sim/run.ts';
import { readBenchArgs } from './flags.ts';

const values = readBenchArgs('bench:sim-tier', {
  json: { type: 'boolean' },
  duration: { type: 'string' },
  'cpu-kv-gib': { type: 'string' },
  replicas: { type: 'string' },
});
const durationS = Number(values.duration ?? 120);
if (!(durationS > 0))
  throw new Error(`--duration must be a number of seconds > 0, got ${values.duration}`);
const cpuKvGiB = Number(values['cpu-kv-gib'] ?? 100);
if (!(cpuKvGiB > 0))
  throw new Error(`--cpu-kv-gib must be a number of GiB > 0, got ${values['cpu-kv-gib']}`);
const replicas = Number(values.replicas ?? 8);
if (!Number.isInteger(replicas) || replicas < 1)
  throw new Error(`--replicas must be an integer >= 1, got ${values.replicas}`);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
if (!Number.isInteger(RUNS) || RUNS < 1)
  throw new Error(`BENCH_RUNS must be an integer >= 1, got ${process.env.BENCH_RUNS}`);

/** Blocks the replicas' tiers stored and evicted in the run (0 without a tier). */
interface TierBlocks {
  stored: number;
  evicted: number;
}

function runOnce(engine: EngineOptions): {
  wallMs: number;
  cpuMs: number;
  result: ReturnType<typeof simulate>;
  tier: TierBlocks;
} {
  const engines: SimEngine[] = [];
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const result = simulate({
    workload: { kind: 'synthetic', name: 'seed', ratePerS: 40 },
    seed: 1,
    durationMs: durationS * 1000,
    warmupMs: Math.min(60, durationS / 10) * 1000,
    replicas,
    engine,
    router: { policy: 'cost', index: 'events', queueSource: 'ledger' },
    view: { staleMs: 0, reportMs: 100, eventDelayMs: 0 },
    faults: [],
    slo: { ...DEFAULT_SLO },
    instrument: {
      engine: (e: SimEngine): SimEngine => {
        engines.push(e);
        return e;
      },
    },
  });
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  const tier = { stored: 0, evicted: 0 };
  for (const e of engines) {
    const c = e.counters().cpuOffload;
    tier.stored += c?.storedBlocks ?? 0;
    tier.evicted += c?.evictedBlocks ?? 0;
  }
  return { wallMs, cpuMs, result, tier };
}

const median = (xs: readonly number[]): number =>
  [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const sides = {
  noTier: {
    engine: ENGINE_DEFAULTS as EngineOptions,
    wallMs: [] as number[],
    cpuMs: [] as number[],
  },
  tier: {
    engine: { ...ENGINE_DEFAULTS, cpuKvGiB } as EngineOptions,
    wallMs: [] as number[],
    cpuMs: [] as number[],
  },
};
const hitRate = { noTier: 0, tier: 0 };
let tierBlocks: TierBlocks = { stored: 0, evicted: 0 };
for (let r = 0; r < RUNS; r++) {
  for (const name of ['noTier', 'tier'] as const) {
    const once = runOnce(sides[name].engine);
    sides[name].wallMs.push(once.wallMs);
    sides[name].cpuMs.push(once.cpuMs);
    hitRate[name] = once.result.hitRate;
    if (name === 'tier') tierBlocks = once.tier;
    process.stderr.write(
      `run ${r + 1}/${RUNS} ${name}: ${Math.round(once.wallMs)} ms wall, ${Math.round(once.cpuMs)} ms CPU\n`,
    );
  }
}
const noTierMs = median(sides.noTier.wallMs);
const tierMs = median(sides.tier.wallMs);
const out = {
  simulatedS: durationS,
  replicas,
  cpuKvGiB,
  runs: RUNS,
  noTierWallMs: Math.round(noTierMs),
  tierWallMs: Math.round(tierMs),
  tierRatio: Math.round((tierMs / noTierMs) * 100) / 100,
  noTierCpuMs: Math.round(median(sides.noTier.cpuMs)),
  tierCpuMs: Math.round(median(sides.tier.cpuMs)),
  tierCpuRatio: Math.round((median(sides.tier.cpuMs) / median(sides.noTier.cpuMs)) * 100) / 100,
  hitRateNoTier: Math.round(hitRate.noTier * 1000) / 1000,
  hitRateTier: Math.round(hitRate.tier * 1000) / 1000,
  tierStoredBlocks: tierBlocks.stored,
  tierEvictedBlocks: tierBlocks.evicted,
};
if (values.json) process.stdout.write(`${JSON.stringify(out)}\n`);
else {
  for (const [k, v] of Object.entries(out)) process.stdout.write(`${k.padEnd(16)} ${v}\n`);
}
