/**
 * Fleet simulator benchmark. `npm run bench:sim [-- --json] [-- --duration S] [-- --split]`.
 * The router seed's workload (40 req/s, 8,000-token prompts, 6,000 shared), 22 replicas, policy
 * cost, 600 simulated seconds. realTimeFactor = simulated seconds / wall seconds, the median of
 * BENCH_RUNS runs (default 3; each run prints its own on stderr); the runs give identical results.
 * --split times the engine cores (add + step), the router (route, events, reports) and the rest
 * (the simulator: workload, event loop, metrics) separately; the timers cost a little.
 */
import { parseArgs } from 'node:util';
import type { SimEngine, SimRouter } from '../src/sim/fleet.ts';
import { ENGINE_DEFAULTS } from '../src/engine/options.ts';
import { DEFAULT_SLO } from '../src/results/slo.ts';
import { simulate } from '../src/sim/run.ts';

const { values } = parseArgs({
  options: {
    json: { type: 'boolean' },
    duration: { type: 'string' },
    split: { type: 'boolean' },
    policy: { type: 'string' },
  },
});
const durationS = Number(values.duration ?? 600);
const split = values.split ?? false;
const timers = { engineMs: 0, routerMs: 0 };

function timed<A extends unknown[], R>(fn: (...a: A) => R, key: keyof typeof timers) {
  return (...args: A): R => {
    const t0 = performance.now();
    try {
      return fn(...args);
    } finally {
      timers[key] += performance.now() - t0;
    }
  };
}

const instrument = {
  engine: (e: SimEngine): SimEngine => ({
    add: timed(e.add.bind(e), 'engineMs'),
    step: timed(e.step.bind(e), 'engineMs'),
    hasWork: e.hasWork.bind(e),
    counters: timed(e.counters.bind(e), 'engineMs'),
  }),
  router: (r: SimRouter): SimRouter => ({
    wantsEvents: r.wantsEvents,
    route: timed(r.route.bind(r), 'routerMs'),
    onFirstToken: timed(r.onFirstToken.bind(r), 'routerMs'),
    onFinished: timed(r.onFinished.bind(r), 'routerMs'),
    onReport: timed(r.onReport.bind(r), 'routerMs'),
    applyEvents: timed(r.applyEvents.bind(r), 'routerMs'),
    markDown: r.markDown.bind(r),
    markUp: r.markUp.bind(r),
  }),
};

function runOnce(): { wallMs: number; result: ReturnType<typeof simulate> } {
  const t0 = performance.now();
  const result = simulate({
    workload: { kind: 'synthetic', name: 'seed' },
    seed: 1,
    durationMs: durationS * 1000,
    warmupMs: Math.min(60, durationS / 10) * 1000,
    replicas: 22,
    engine: ENGINE_DEFAULTS,
    router: { policy: values.policy ?? 'cost', index: 'events', queueSource: 'ledger' },
    view: { staleMs: 0, reportMs: 100, eventDelayMs: 0 },
    faults: [],
    slo: { ...DEFAULT_SLO },
    ...(split && { instrument }),
  });
  return { wallMs: performance.now() - t0, result };
}

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
if (!Number.isInteger(RUNS) || RUNS < 1)
  throw new Error(`BENCH_RUNS must be an integer >= 1, got ${process.env.BENCH_RUNS}`);
const runs: number[] = [];
let result!: ReturnType<typeof simulate>;
for (let r = 0; r < RUNS; r++) {
  const once = runOnce();
  runs.push(once.wallMs);
  result = once.result;
  process.stderr.write(
    `run ${r + 1}/${RUNS}: ${Math.round((durationS * 1000) / once.wallMs)}x real time\n`,
  );
}
const wallMs = [...runs].sort((a, b) => a - b)[Math.floor(runs.length / 2)]!;
const out = {
  realTimeFactor: Math.round((durationS * 1000) / wallMs),
  wallMs: Math.round(wallMs),
  simulatedS: durationS,
  engineSteps: result.engineSteps,
  requests: result.arrived,
  events: result.events,
  ttftP99Ms: Math.round(result.ttftMs.p99),
  hitRate: Math.round(result.hitRate * 1000) / 1000,
  ...(split && {
    // The timers add up over all runs: per run, on average.
    engineMs: Math.round(timers.engineMs / RUNS),
    routerMs: Math.round(timers.routerMs / RUNS),
    simulatorMs: Math.round(wallMs - (timers.engineMs + timers.routerMs) / RUNS),
  }),
};
if (values.json) process.stdout.write(`${JSON.stringify(out)}\n`);
else {
  for (const [k, v] of Object.entries(out)) process.stdout.write(`${k.padEnd(16)} ${v}\n`);
}
