/**
 * Fleet simulator benchmark. `npm run bench:sim [-- --json] [-- --duration S] [-- --split]`.
 * The router seed's workload (40 req/s, 8,000-token prompts, 6,000 shared), 22 replicas, policy
 * cost, 600 simulated seconds. realTimeFactor = simulated seconds / wall seconds, the median of
 * BENCH_RUNS runs (default 3; each run prints its own on stderr); the runs give identical results.
 * --split times the engine cores (add + step), the router (route, events, reports) and the rest
 * (the simulator: workload, event loop, metrics) separately; the timers cost a little.
 * --scale [--factors 1,4,16] runs the workload scaled up, replicas and rate together, one child
 * process per fleet (bench/simScale.ts), and prints how wall time and memory grow with the fleet.
 */
import type { SimEngine, SimRouter } from '../src/sim/fleet.ts';
import { ENGINE_DEFAULTS } from '../src/engine/options.ts';
import { DEFAULT_SLO } from '../src/results/slo.ts';
import { simulate } from '../src/sim/run.ts';
import { runScale, type ScaleRow } from './simScale.ts';
import { readBenchArgs } from './flags.ts';

const values = readBenchArgs('bench:sim', {
  json: { type: 'boolean' },
  duration: { type: 'string' },
  split: { type: 'boolean' },
  policy: { type: 'string' },
  scale: { type: 'boolean' },
  factors: { type: 'string' },
  'scale-one': { type: 'string' },
});
const durationS = Number(values.duration ?? (values.scale ? 120 : 600));
if (!(durationS > 0))
  throw new Error(`--duration must be a number of seconds > 0, got ${values.duration}`);
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
    abort: timed(e.abort.bind(e), 'engineMs'),
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

/** The seed workload on 22 replicas at 40 req/s, both times `factor`. */
function runOnce(
  factor = 1,
  onFirstRoute?: () => void,
): { wallMs: number; result: ReturnType<typeof simulate> } {
  const t0 = performance.now();
  const firstRoute = onFirstRoute && {
    router: (r: SimRouter): SimRouter => {
      const route = r.route.bind(r);
      let seen = false;
      r.route = (req, nowMs) => {
        if (!seen) {
          seen = true;
          onFirstRoute();
        }
        return route(req, nowMs);
      };
      return r;
    },
  };
  const result = simulate({
    workload: { kind: 'synthetic', name: 'seed', ratePerS: 40 * factor },
    seed: 1,
    durationMs: durationS * 1000,
    warmupMs: Math.min(60, durationS / 10) * 1000,
    replicas: 22 * factor,
    engine: ENGINE_DEFAULTS,
    router: { policy: values.policy ?? 'cost', index: 'events', queueSource: 'ledger' },
    view: { staleMs: 0, reportMs: 100, eventDelayMs: 0 },
    faults: [],
    slo: { ...DEFAULT_SLO },
    ...(split ? { instrument } : firstRoute && { instrument: firstRoute }),
  });
  return { wallMs: performance.now() - t0, result };
}

/** One fleet of the --scale table (a child process of `runScale`): its row as JSON. */
function scaleOne(factor: number): void {
  const baseRssMb = process.memoryUsage().rss / 1e6;
  const cpu0 = process.cpuUsage();
  const cpuMs0 = (cpu0.user + cpu0.system) / 1000;
  const t0 = performance.now();
  let setupMs = 0;
  const { wallMs, result } = runOnce(factor, () => {
    setupMs = performance.now() - t0;
  });
  const row: ScaleRow = {
    factor,
    replicas: 22 * factor,
    ratePerS: 40 * factor,
    wallMs,
    setupMs,
    simulatedS: durationS,
    engineSteps: result.engineSteps ?? 0,
    events: result.events ?? 0,
    requests: result.arrived,
    cpuMs: (process.cpuUsage().user + process.cpuUsage().system) / 1000 - cpuMs0,
    peakRssMb: (process.resourceUsage().maxRSS * 1024) / 1e6,
    baseRssMb,
  };
  process.stdout.write(`${JSON.stringify(row)}\n`);
}

if (values['scale-one'] !== undefined) {
  scaleOne(Number(values['scale-one']));
  process.exit(0);
}
if (values.scale) {
  const factors = (values.factors ?? '1,4,16').split(',').map(Number);
  if (factors.some((f) => !Number.isInteger(f) || f < 1))
    throw new Error(`--factors must be integers >= 1, got ${values.factors}`);
  runScale(factors, durationS, values.json ?? false);
  process.exit(0);
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
