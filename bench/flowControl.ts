/**
 * Flow control's acceptance experiment (issue 57), simulated: the seed workload on a fleet of
 * `--replicas` (default 8), first the fleet's carrying rate (the highest rate meeting TTFT p99
 * <= 1.5 x each prompt's idle TTFT and the default TPOT target, bisected to 0.5 req/s), then at
 * `--load` (default 1.5) times that rate two tenants, heavy sending 80 % of the arrivals and light
 * 20 %, without and with flow control, beside light's own traffic alone on the same fleet.
 * Prints each run's per-tenant figures and the ratios of light's TTFT p99 to its unloaded one.
 *
 *   npm run bench:flow
 *   npm run bench:flow -- --replicas 8 --duration 120 --rate 21.5 --json
 *
 * `--rate R` skips the bisection and takes R as the carrying rate; `--light-weight W` gives the
 * light tenant weight W in the fair share (default 1, as heavy). `--flow-release room|owner`
 * picks when a queued request leaves (`SimFlowControl.release`), with `--owner-slack-tokens`,
 * `--owner-hold-ms`, `--look-ahead`, `--owner-pass-ms` (inside a tenant, one that goes warm
 * passes earlier ones that would go cold while they are younger than this; 0: never),
 * `--charge prompt|uncached` (what a dispatch costs its
 * tenant in the fair share) and `--finish-first on|off` (a sparse tenant's request goes where
 * its prefill ends first) for `owner`; `--saturation-queue-ms MS` the replica's
 * queued-prefill limit (`--flow-saturation-queue-ms`). `--slowest N` prints the light tenant's N
 * slowest measured requests of the run with flow control: arrival, queue wait, the rest of its
 * TTFT (on the engine), prompt tokens cached on the replica that served it. `--json` prints
 * {"carryingRatePerS", "ratePerS", "runs": {"alone", "without", "with"}, "ratios"}.
 */
import { parseSimFlags } from '../src/cli/sim.ts';
import { formatFlow } from '../src/results/flowTable.ts';
import {
  DEFAULT_FLOW_LOOK_AHEAD,
  DEFAULT_FLOW_OWNER_HOLD_MS,
  DEFAULT_FLOW_OWNER_SLACK_TOKENS,
  defaultFlowControl,
  FLOW_CHARGES,
  FLOW_RELEASES,
  type FlowCharge,
  type FlowRelease,
} from '../src/sim/flowControl.ts';
import { carryingRatePerS, runFlowExperiment, tenantOf } from '../src/sim/flowExperiment.ts';
import type { RequestRecord } from '../src/results/requestRecord.ts';
import { benchFlags, readBenchArgs } from './flags.ts';

/** Light's `n` slowest requests (by TTFT): where each one's time went. */
function formatSlowest(records: RequestRecord[], n: number): string {
  const top = [...records].sort((a, b) => (b.ttftMs ?? 0) - (a.ttftMs ?? 0)).slice(0, n);
  const ms = (v: number) => String(Math.round(v)).padStart(8);
  const lines = top.map((r) => {
    const wait = r.queueWaitMs ?? 0;
    const ttft = r.ttftMs ?? 0;
    return `${String(r.id).padStart(6)} ${ms(r.arrivalMs)} ${ms(ttft)} ${ms(wait)} ${ms(ttft - wait)} ${String(r.cachedTokens ?? '-').padStart(7)}/${r.promptTokens} ${String(r.replica).padStart(7)}`;
  });
  return [
    `light's ${top.length} slowest of ${records.length} measured, with flow control (ms):`,
    '    id  arrival     TTFT    queue   engine  cached/prompt  replica',
    ...lines,
  ].join('\n');
}

const values = readBenchArgs('bench:flow', {
  json: { type: 'boolean' },
  replicas: { type: 'string' },
  duration: { type: 'string' },
  rate: { type: 'string' },
  load: { type: 'string' },
  seed: { type: 'string' },
  'light-weight': { type: 'string' },
  'flow-release': { type: 'string' },
  'owner-slack-tokens': { type: 'string' },
  'owner-hold-ms': { type: 'string' },
  'look-ahead': { type: 'string' },
  'owner-pass-ms': { type: 'string' },
  charge: { type: 'string' },
  'finish-first': { type: 'string' },
  'saturation-queue-ms': { type: 'string' },
  slowest: { type: 'string' },
});
const { fail, positiveInt } = benchFlags('bench:flow');
const replicas = positiveInt('replicas', values.replicas, 8);
const durationS = positiveInt('duration', values.duration, 120);
const seed = positiveInt('seed', values.seed, 1);
const load = values.load === undefined ? 1.5 : Number(values.load);
if (!(load > 0)) fail(`--load takes a number > 0, got '${values.load}'`);
const lightWeight = values['light-weight'] === undefined ? 1 : Number(values['light-weight']);
if (!(lightWeight > 0)) fail(`--light-weight takes a number > 0, got '${values['light-weight']}'`);
const release = values['flow-release'] ?? defaultFlowControl().release ?? 'room';
if (!(FLOW_RELEASES as readonly string[]).includes(release)) {
  fail(`--flow-release takes one of ${FLOW_RELEASES.join(', ')}, got '${release}'`);
}
const nonNegative = (name: string, raw: string | undefined, fallback: number): number => {
  if (raw === undefined) return fallback;
  const v = Number(raw);
  if (!(v >= 0 && Number.isFinite(v))) fail(`--${name} takes a number >= 0, got '${raw}'`);
  return v;
};
const ownerSlackTokens = nonNegative(
  'owner-slack-tokens',
  values['owner-slack-tokens'],
  DEFAULT_FLOW_OWNER_SLACK_TOKENS,
);
const ownerHoldMs = nonNegative(
  'owner-hold-ms',
  values['owner-hold-ms'],
  DEFAULT_FLOW_OWNER_HOLD_MS,
);
const defaults = defaultFlowControl();
const ownerPassMs = nonNegative(
  'owner-pass-ms',
  values['owner-pass-ms'],
  defaults.ownerPassMs ?? 0,
);
const saturationQueueMs = nonNegative(
  'saturation-queue-ms',
  values['saturation-queue-ms'],
  defaults.saturation.maxQueuedPrefillMs ?? 0,
);
const charge = values.charge ?? defaultFlowControl().charge ?? 'prompt';
if (!(FLOW_CHARGES as readonly string[]).includes(charge)) {
  fail(`--charge takes one of ${FLOW_CHARGES.join(', ')}, got '${charge}'`);
}
const finishFirst = values['finish-first'] ?? 'on';
if (finishFirst !== 'on' && finishFirst !== 'off') {
  fail(`--finish-first takes on or off, got '${finishFirst}'`);
}
const lookAhead = positiveInt('look-ahead', values['look-ahead'], DEFAULT_FLOW_LOOK_AHEAD);
const slowest = values.slowest === undefined ? 0 : positiveInt('slowest', values.slowest, 1);
const givenRate = values.rate === undefined ? undefined : Number(values.rate);
if (givenRate !== undefined && !(givenRate > 0)) {
  fail(`--rate takes a number > 0, got '${values.rate}'`);
}

const setup = parseSimFlags([
  '--workload',
  'seed',
  '--replicas',
  String(replicas),
  '--duration',
  String(durationS),
  '--warmup',
  String(Math.min(20, durationS / 5)),
  '--seed',
  String(seed),
  '--slo-ttft-slowdown',
  '1.5',
  '--quiet',
]);
if (setup === 'help') throw new Error('unreachable');
const log = (line: string) => {
  if (!values.json) process.stderr.write(`${line}\n`);
};

const carrying =
  givenRate ??
  carryingRatePerS(setup.base, { loPerS: 1, hiPerS: 8 * replicas, stepPerS: 0.5 }, (r, met) =>
    log(`  probe ${r} req/s: SLO ${met ? 'met' : 'missed'}`),
  );
const ratePerS = Math.round(carrying * load * 100) / 100;
log(`carrying rate ${carrying.toFixed(2)} req/s; experiment at ${ratePerS} req/s (${load}x)`);

const tenants = [
  { name: 'heavy', share: 0.8, weight: 1, priorityClass: 'standard' as const },
  { name: 'light', share: 0.2, weight: lightWeight, priorityClass: 'standard' as const },
];
const LIGHT = 1;
const warmupMs = Math.min(20, durationS / 5) * 1000;
const lightRecords: RequestRecord[] = [];
const e = runFlowExperiment(
  setup.base,
  ratePerS,
  tenants,
  'light',
  {
    ...defaults,
    saturation: { ...defaults.saturation, maxQueuedPrefillMs: saturationQueueMs },
    release: release as FlowRelease,
    ownerSlackTokens,
    ownerHoldMs,
    lookAhead,
    ownerPassMs,
    charge: charge as FlowCharge,
    sparseFinishFirst: finishFirst === 'on',
  },
  slowest > 0
    ? (r) => {
        if (r.tenant === LIGHT && r.ttftMs !== null && r.arrivalMs >= warmupMs) {
          lightRecords.push(r);
        }
      }
    : undefined,
);
const unloadedMs = tenantOf(e.alone, 'light').ttftP99Ms;
const ratios = {
  lightWithout: tenantOf(e.without, 'light').ttftP99Ms / unloadedMs,
  lightWith: tenantOf(e.with, 'light').ttftP99Ms / unloadedMs,
  heavyWithout: tenantOf(e.without, 'heavy').ttftP99Ms / unloadedMs,
  heavyWith: tenantOf(e.with, 'heavy').ttftP99Ms / unloadedMs,
};

if (values.json) {
  const slim = (r: typeof e.alone) => ({ flow: r.flow, completed: r.completed, errors: r.errors });
  process.stdout.write(
    `${JSON.stringify({
      carryingRatePerS: carrying,
      ratePerS,
      runs: { alone: slim(e.alone), without: slim(e.without), with: slim(e.with) },
      ratios,
    })}\n`,
  );
} else {
  process.stdout.write(
    `${formatFlow([
      { label: 'light alone', flow: e.alone.flow! },
      { label: 'without', flow: e.without.flow! },
      { label: 'with', flow: e.with.flow! },
    ])}\n\n`,
  );
  const x = (v: number) => `${v.toFixed(2)}x`;
  if (slowest > 0) process.stdout.write(`${formatSlowest(lightRecords, slowest)}\n\n`);
  process.stdout.write(
    `TTFT p99 over light's unloaded ${Math.round(unloadedMs)} ms:\n` +
      `  light: without flow control ${x(ratios.lightWithout)}, with ${x(ratios.lightWith)}\n` +
      `  heavy: without flow control ${x(ratios.heavyWithout)}, with ${x(ratios.heavyWith)}\n`,
  );
}
