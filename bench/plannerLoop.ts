/**
 * The online planner in the simulator's loop against the best fixed fleets, on a trace whose rate
 * doubles and halves (issue 57's acceptance: at most 15 % more replica-hours than the best fixed
 * fleet per phase, the SLO met, the first answer within 60 s of traffic).
 *
 * The trace: the Mooncake synthetic trace (data/mooncake/synthetic_trace.jsonl) cut into three
 * phases of `--phase-s` seconds each, at 1x, 2x (the next 2 x phase-s seconds of the trace, time
 * halved) and 1x again; written beside the figures as `phased-trace.jsonl`.
 *
 * The fixed fleets: `kvroute sim --search` (runBatch) on each phase's own slice, with the
 * warm-up the planner's window replays use (a fifth of the phase, at most 60 s). Their
 * replica-hours: the sum over phases of phase length x that phase's fewest replicas.
 *
 * The planner: `kvroute sim --planner` on the whole phased trace (`simulatePlannerLoop`, the
 * same code): every `--interval-s` it searches the last `--window-s` of arrivals, the hysteresis
 * holds lower answers `--scale-down-s`, replicas added take requests `--startup-s` later and
 * removed ones drain; with `--fast-window-s` (default 30; 0: off) each round also searches the
 * last stretch alone and takes the larger answer. The fleet starts at `--start-replicas` (default: the first phase's fixed
 * answer, the fleet that was running when the traffic began); the same warm-up is left out of
 * its SLO. Its replica-hours count every replica from the moment it is asked for (start-up
 * included) until it has drained, over the trace's span. The simulation is deterministic (one
 * seed, one thread), so one run is the figure: there is no median to take.
 *
 *   npm run bench:planner -- [--phase-s 120] [--window-s 120] [--interval-s 30]
 *                            [--scale-down-s 120] [--startup-s 60] [--start-replicas N]
 *                            [--fast-window-s 30 (0: off)]
 *                            [--threads 2] [--slo-ttft-slowdown 3] [--trace FILE] [--json]
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { parseSimFlags } from '../src/cli/sim.ts';
import { formatPlannerLoop } from '../src/cli/simPlanner.ts';
import { DEFAULT_POLICY } from '../src/router/defaults.ts';
import { windowSimConfig, warmupSOf } from '../src/serving/searchWindow.ts';
import { runBatch } from '../src/sim/parallel.ts';
import { simulatePlannerLoop } from '../src/sim/plannerLoop.ts';
import { benchFlags } from './flags.ts';

const { values } = parseArgs({
  options: {
    'phase-s': { type: 'string' },
    'window-s': { type: 'string' },
    'interval-s': { type: 'string' },
    'scale-down-s': { type: 'string' },
    'startup-s': { type: 'string' },
    'start-replicas': { type: 'string' },
    'fast-window-s': { type: 'string' },
    threads: { type: 'string' },
    trace: { type: 'string' },
    'slo-ttft-slowdown': { type: 'string' },
    json: { type: 'boolean' },
  },
});
const { fail, positiveInt } = benchFlags('bench:planner');
const phaseS = positiveInt('phase-s', values['phase-s'], 120);
const windowS = positiveInt('window-s', values['window-s'], 120);
const intervalS = positiveInt('interval-s', values['interval-s'], 30);
const scaleDownS = positiveInt('scale-down-s', values['scale-down-s'], 120);
const startupS = positiveInt('startup-s', values['startup-s'], 60);
const threads = positiveInt('threads', values.threads, 2);
// 0 turns it off (one window, as serve --planner).
const fastWindowS =
  values['fast-window-s'] === '0' ? 0 : positiveInt('fast-window-s', values['fast-window-s'], 30);
// The trace's longest prompts alone take longer than any fixed TTFT target: a relative one.
const slowdown = Number(values['slo-ttft-slowdown'] ?? 3);
if (!(slowdown >= 1))
  fail(`--slo-ttft-slowdown takes a number >= 1, got '${values['slo-ttft-slowdown']}'`);
const simArgs = ['--slo-ttft-slowdown', String(slowdown)];
const tracePath =
  values.trace ?? new URL('../data/mooncake/synthetic_trace.jsonl', import.meta.url).pathname;
/** The acceptance targets of issue 57. */
const TARGET_RATIO = 1.15;
const TARGET_FIRST_ANSWER_S = 60;

interface Rec {
  timestamp: number;
  input_length: number;
  output_length: number;
  hash_ids: number[];
}
const records: Rec[] = readFileSync(tracePath, 'utf8')
  .split('\n')
  .filter((l) => l.trim() !== '')
  .map((l) => JSON.parse(l) as Rec);

/** Phases: [trace from, trace to) in ms, and the time scale (0.5: double rate). */
const P = phaseS * 1000;
const phases = [
  { name: '1x', fromMs: 0, toMs: P, scale: 1 },
  { name: '2x', fromMs: P, toMs: 3 * P, scale: 0.5 },
  { name: '1x again', fromMs: 3 * P, toMs: 4 * P, scale: 1 },
];
const phased: Rec[][] = phases.map((ph, i) =>
  records
    .filter((r) => r.timestamp >= ph.fromMs && r.timestamp < ph.toMs)
    .map((r) => ({ ...r, timestamp: Math.round(i * P + (r.timestamp - ph.fromMs) * ph.scale) })),
);
const all = phased.flat();
const dir = mkdtempSync(join(tmpdir(), 'kvroute-bench-planner-'));
const jsonl = (rs: Rec[], shiftMs = 0) =>
  `${rs.map((r) => JSON.stringify({ ...r, timestamp: r.timestamp - shiftMs })).join('\n')}\n`;
const phasedPath = join(dir, 'phased-trace.jsonl');
writeFileSync(phasedPath, jsonl(all));

const wallStart = performance.now();
// Fixed fleets: sim --search on each phase's own slice, on worker threads.
const searches = phased.map((rs, i) => {
  const path = join(dir, `phase-${i}.jsonl`);
  writeFileSync(path, jsonl(rs, i * P));
  return {
    label: phases[i]!.name,
    config: windowSimConfig(path, P, { simArgs, policy: DEFAULT_POLICY }),
  };
});
const fixed = await runBatch({ runs: [], searches, bounds: { start: 8, max: 64 }, threads });
const fixedReplicas = fixed.search.map((s) => s.minReplicas);
if (fixedReplicas.some((n) => n === null)) fail(`a phase met the SLO at no count up to 64`);
const fixedReplicaHours = fixedReplicas.reduce<number>((a, n) => a + n! * phaseS, 0) / 3600;

// The planner in the loop: kvroute sim --planner's own run, on the whole phased trace.
const startReplicas = positiveInt('start-replicas', values['start-replicas'], fixedReplicas[0]!);
const parsed = parseSimFlags([
  '--trace',
  phasedPath,
  '--warmup',
  String(warmupSOf(P)),
  '--replicas',
  String(startReplicas),
  '--policy',
  DEFAULT_POLICY,
  ...simArgs,
]);
if (parsed === 'help') throw new Error('unreachable');
const loop = simulatePlannerLoop(parsed.base, {
  windowMs: windowS * 1000,
  intervalMs: intervalS * 1000,
  scaleDownMs: scaleDownS * 1000,
  startupMs: startupS * 1000,
  maxReplicas: 64,
  ...(fastWindowS > 0 && { fastWindowMs: fastWindowS * 1000 }),
});
const { run, planner } = loop;
// Over the phases' span exactly, as the fixed fleets are counted.
const plannerReplicaHours = planner.replicaHours * ((3 * phaseS) / planner.spanS);
const ratio = plannerReplicaHours / fixedReplicaHours;
const result = {
  trace: tracePath,
  phaseS,
  windowS,
  intervalS,
  scaleDownS,
  startupS,
  fastWindowS,
  startReplicas,
  sloTtftSlowdown: slowdown,
  requests: all.length,
  fixedReplicas,
  fixedReplicaHours,
  plannerReplicaHours,
  ratio,
  ratioTarget: TARGET_RATIO,
  sloMet: run.sloMet ?? false,
  ttftP99Ms: run.ttftMs.p99,
  ttftSlowdownP99: run.ttftSlowdown?.p99 ?? null,
  tpotP99Ms: run.tpotMs.p99,
  itlP99Ms: run.itlMs.p99,
  errors: run.errors,
  firstAnswerS: planner.firstAnswerS,
  firstAnswerTargetS: TARGET_FIRST_ANSWER_S,
  pass:
    ratio <= TARGET_RATIO &&
    run.sloMet === true &&
    planner.firstAnswerS !== null &&
    planner.firstAnswerS <= TARGET_FIRST_ANSWER_S,
  rounds: planner.rounds,
  sizes: planner.sizes,
  wallS: (performance.now() - wallStart) / 1000,
};
if (values.json) {
  console.log(JSON.stringify(result));
} else {
  const f = (x: number, d: number) => x.toFixed(d);
  console.log(`phased trace: ${phasedPath} (${all.length} requests, 3 x ${phaseS} s)`);
  console.log(
    `best fixed fleets per phase: ${fixedReplicas.join(', ')} -> ${f(fixedReplicaHours, 3)} replica-hours`,
  );
  console.log(
    `planner in the loop: ${f(plannerReplicaHours, 3)} replica-hours; ratio ${f(ratio, 3)} (target <= ${TARGET_RATIO})`,
  );
  console.log(
    `SLO met: ${result.sloMet ? 'yes' : 'no'} (TTFT p99 ${f(run.ttftMs.p99, 0)} ms, slowdown p99 ${f(result.ttftSlowdownP99 ?? Number.NaN, 2)} of ${slowdown}; TPOT p99 ${f(run.tpotMs.p99, 1)} ms of ${run.slo?.tpotP99Ms}; ITL p99 ${f(run.itlMs.p99, 1)} ms; errors ${run.errors})`,
  );
  console.log(
    `first answer: ${planner.firstAnswerS ?? 'none'} s (target <= ${TARGET_FIRST_ANSWER_S})`,
  );
  console.log(`pass: ${result.pass ? 'yes' : 'no'}; wall ${f(result.wallS, 0)} s\n`);
  console.log(formatPlannerLoop(run, planner));
}
