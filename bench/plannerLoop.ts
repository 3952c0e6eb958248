/**
 * The online planner against the best fixed fleets, on a trace whose rate doubles and halves.
 *
 * The trace: the Mooncake synthetic trace (../shared/data/mooncake/synthetic_trace.jsonl) cut
 * into three phases of `--phase-s` seconds each, at 1x, 2x (the next 2 x phase-s seconds of the
 * trace, time halved) and 1x again; written beside the figures as `phased-trace.jsonl`.
 *
 * The fixed fleets: `kvroute sim --search`'s search (runBatch) on each phase's own slice.
 * The planner: its pure core as `serve --planner` runs it, every `--interval-s` over the last
 * `--window-s` of arrivals (RequestWindow, searchWindow on worker threads, Hysteresis with
 * `--scale-down-s`); a count going up runs `--startup-s` later, going down at once; the first
 * count runs from time 0 (the fleet that meets the first traffic).
 *
 * What it does not do: run the fleet the planner sizes in one simulation (`kvroute sim
 * --planner`, replicas added and removed mid-run, is not built). "covered" says whether, in each
 * phase, the planner's running count never fell below that phase's fixed answer: a proxy for the
 * SLO, not a measurement of it.
 *
 *   npm run bench:planner -- [--phase-s 200] [--window-s 120] [--interval-s 60]
 *                            [--scale-down-s 120] [--startup-s 60] [--threads 2] [--json]
 *                            [--slo-ttft-slowdown 3]   (sim's relative TTFT target; TPOT: sim's)
 */
import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchFlags, readBenchArgs } from './flags.ts';
import { Hysteresis } from '../src/planner/online/hysteresis.ts';
import { searchWindow, windowSimConfig } from '../src/planner/online/searchWindow.ts';
import { type Observation, RequestWindow } from '../src/planner/online/window.ts';
import { runBatch } from '../src/sim/parallel.ts';
import { DEFAULT_POLICY } from '../src/router/defaults.ts';

const values = readBenchArgs('bench:planner', {
  'phase-s': { type: 'string' },
  'window-s': { type: 'string' },
  'interval-s': { type: 'string' },
  'scale-down-s': { type: 'string' },
  'startup-s': { type: 'string' },
  threads: { type: 'string' },
  trace: { type: 'string' },
  'slo-ttft-slowdown': { type: 'string' },
  json: { type: 'boolean' },
});
const { fail, positiveInt } = benchFlags('bench:planner');
const phaseS = positiveInt('phase-s', values['phase-s'], 200);
const windowS = positiveInt('window-s', values['window-s'], 120);
const intervalS = positiveInt('interval-s', values['interval-s'], 60);
const scaleDownS = positiveInt('scale-down-s', values['scale-down-s'], 120);
const startupS = positiveInt('startup-s', values['startup-s'], 60);
const threads = positiveInt('threads', values.threads, 2);
// The trace's longest prompts alone take longer than any fixed TTFT target: a relative one.
const slowdown = Number(values['slo-ttft-slowdown'] ?? 3);
if (!(slowdown >= 1))
  fail(`--slo-ttft-slowdown takes a number >= 1, got '${values['slo-ttft-slowdown']}'`);
const simArgs = ['--slo-ttft-slowdown', String(slowdown)];
const tracePath =
  values.trace ??
  new URL('../../shared/data/mooncake/synthetic_trace.jsonl', import.meta.url).pathname;

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
writeFileSync(join(dir, 'phased-trace.jsonl'), jsonl(all));

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

// The planner: the serve shell's round, at simulated times.
const window = new RequestWindow(windowS * 1000);
const hysteresis = new Hysteresis({ scaleDownMs: scaleDownS * 1000 });
const endMs = 3 * P;
const decisions: { atS: number; answer: number | null; desired: number; move: string }[] = [];
let next = 0;
for (let t = intervalS * 1000; t <= endMs; t += intervalS * 1000) {
  while (next < all.length && all[next]!.timestamp <= t) {
    const r = all[next++]!;
    const obs: Observation = {
      atMs: r.timestamp,
      promptTokens: r.input_length,
      outputTokens: r.output_length,
      // The trace's ids already are its 512-token chunks, chained as the gateway's keys are.
      chunkKeys: r.hash_ids.slice(0, Math.floor(r.input_length / 512)),
    };
    window.add(obs);
  }
  const obs = window.observations(t);
  if (obs.length < 2) continue;
  const answer = await searchWindow(obs, {
    simArgs,
    policy: DEFAULT_POLICY,
    maxReplicas: 64,
    threads,
    startReplicas: hysteresis.desired ?? 8,
  });
  const step = hysteresis.step(answer.minReplicas ?? 64, t);
  decisions.push({
    atS: t / 1000,
    answer: answer.minReplicas,
    desired: step.desired,
    move: step.move,
  });
  if (!values.json)
    console.error(
      `t=${t / 1000}s answer=${answer.minReplicas} desired=${step.desired} ${step.move}`,
    );
}

// Running replicas over time: the first count from 0; up after the start-up delay; down at once.
const changes: { atMs: number; replicas: number }[] = [];
decisions.forEach((d, i) => {
  if (i === 0) changes.push({ atMs: 0, replicas: d.desired });
  else if (d.desired > decisions[i - 1]!.desired)
    changes.push({ atMs: d.atS * 1000 + startupS * 1000, replicas: d.desired });
  else if (d.desired < decisions[i - 1]!.desired)
    changes.push({ atMs: d.atS * 1000, replicas: d.desired });
});
changes.sort((a, b) => a.atMs - b.atMs);
const runningAt = (ms: number) => {
  let r = changes[0]?.replicas ?? 0;
  for (const c of changes) if (c.atMs <= ms) r = c.replicas;
  return r;
};
let plannerReplicaMs = 0;
const covered: boolean[] = phases.map(() => true);
for (let ms = 0; ms < endMs; ms += 1000) {
  const r = runningAt(ms);
  plannerReplicaMs += r * 1000;
  const phase = Math.floor(ms / P);
  const need = fixedReplicas[phase];
  if (need === null || need === undefined || r < need) covered[phase] = false;
}
const fixedReplicaMs = fixedReplicas.reduce<number>((a, n) => a + (n ?? 64) * P, 0);
const result = {
  trace: tracePath,
  phaseS,
  windowS,
  intervalS,
  scaleDownS,
  startupS,
  sloTtftSlowdown: slowdown,
  requests: all.length,
  fixedReplicas,
  fixedReplicaHours: fixedReplicaMs / 3.6e6,
  plannerReplicaHours: plannerReplicaMs / 3.6e6,
  plannerOverFixed: plannerReplicaMs / fixedReplicaMs - 1,
  firstAnswerS: decisions[0]?.atS ?? null,
  coveredPerPhase: covered,
  decisions,
  wallS: (performance.now() - wallStart) / 1000,
};
console.log(JSON.stringify(result, values.json ? undefined : null, values.json ? undefined : 2));
