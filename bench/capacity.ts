/**
 * Capacity sweep: the fewest replicas with which each policy meets each of several TTFT p99 SLOs
 * (TPOT p99 held at the default), on one workload. Unlike `kvroute sim --search`, which bisects
 * once per SLO, one run here serves every SLO: a run stops early only once it misses the loosest
 * SLO in play, so a run that meets it carries the full TTFT p99 for all the others.
 *
 *   npm run bench:capacity -- --workload seed --duration 300 --policy all
 *   npm run bench:capacity -- --trace data/mooncake/synthetic_trace.jsonl --policy all
 *
 * Per policy: bisect the fewest replicas meeting the loosest SLO, then run every count upward
 * from just below it until every SLO is met and `--margin` more counts pass (so a count that
 * meets an SLO while a larger one misses shows up as non-monotone), up to `--to`. An SLO still
 * unmet at `--to` is searched by doubling and bisection up to `--max`, each probe stopping as
 * soon as that SLO is missed. Every run is kept in `--out` (JSON lines, keyed by workload,
 * duration, seed, policy and options), so a rerun or a wider sweep repeats nothing.
 *
 * `--options JSON` passes knobs to the policy's constructor (variants are cached apart);
 * `--at 12,16` runs just those counts and prints them. `--json` prints the table as JSON.
 * `--quiet` drops the progress within runs (the line per finished run stays).
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { benchFlags, readBenchArgs } from './flags.ts';
import type { PolicyOptions } from '../src/router/registry.ts';
import { ENGINE_DEFAULTS } from '../src/engine/options.ts';
import { DEFAULT_SLO } from '../src/results/slo.ts';
import { Progress } from '../src/cli/progress.ts';
import { type SimConfig, simulate } from '../src/sim/run.ts';
import { WORKLOAD_NAMES, type WorkloadName } from '../src/workload/workloads.ts';

const values = readBenchArgs('capacity', {
  workload: { type: 'string' },
  trace: { type: 'string' },
  duration: { type: 'string' },
  seed: { type: 'string' },
  policy: { type: 'string' },
  options: { type: 'string' },
  slos: { type: 'string' },
  to: { type: 'string' },
  max: { type: 'string' },
  margin: { type: 'string' },
  at: { type: 'string' },
  out: { type: 'string' },
  json: { type: 'boolean' },
  quiet: { type: 'boolean' },
});

const { fail, positiveInt, policies: readPolicies } = benchFlags('capacity');

/** Progress within each run (a run can take minutes): a bar on a TTY, else a line every ~10 s. */
const progress = new Progress({ command: 'capacity', quiet: values.quiet === true });

const tracePath = values.trace;
const workloadName = (values.workload ?? 'seed') as WorkloadName;
if (tracePath === undefined && !WORKLOAD_NAMES.includes(workloadName)) {
  fail(`--workload must be one of ${WORKLOAD_NAMES.join(', ')}, got '${workloadName}'`);
}
const durationS =
  values.duration !== undefined
    ? positiveInt('duration', values.duration, 0)
    : tracePath !== undefined
      ? undefined
      : 300;
const seed = values.seed === undefined ? 1 : Number(values.seed);
const policies = readPolicies(values.policy);
let policyOptions: PolicyOptions = {};
if (values.options !== undefined) {
  try {
    policyOptions = JSON.parse(values.options) as PolicyOptions;
  } catch {
    fail(`--options takes a JSON object, got '${values.options}'`);
  }
}
const slos = (values.slos ?? '570,1000,2000,5000')
  .split(',')
  .map((s) => Number(s))
  .sort((a, b) => a - b);
if (slos.some((s) => !(s > 0))) fail(`--slos takes a list of positive ms, got '${values.slos}'`);
const loosest = slos.at(-1)!;
const toReplicas = positiveInt('to', values.to, 48);
const maxReplicas = positiveInt('max', values.max, 256);
const margin = values.margin === undefined ? 2 : Number(values.margin);
const cachePath = values.out ?? 'out/capacity/runs.jsonl';
const tpotSloMs = DEFAULT_SLO.tpotP99Ms;

/** One run, as kept in the cache. */
interface RunRecord {
  key: string;
  replicas: number;
  /** The TTFT SLO the run stopped early against (it misses every SLO at or under it). */
  stopAtMs: number;
  stoppedEarly: boolean;
  ttftP99Ms: number;
  ttftP50Ms: number;
  tpotP99Ms: number;
  errors: number;
  measured: number;
  hitRate: number;
  utilization: number;
  decisions: number;
  spills: number;
  wallMs: number;
}

const workloadTag = tracePath !== undefined ? `trace:${tracePath}` : workloadName;
const keyOf = (policy: string): string =>
  [workloadTag, `d${durationS ?? 'all'}`, `s${seed}`, policy, JSON.stringify(policyOptions)].join(
    '|',
  );

const cache = new Map<string, RunRecord[]>();
if (existsSync(cachePath)) {
  for (const line of readFileSync(cachePath, 'utf8').split('\n')) {
    if (line.trim() === '') continue;
    const rec = JSON.parse(line) as RunRecord;
    const k = `${rec.key}#${rec.replicas}`;
    cache.set(k, [...(cache.get(k) ?? []), rec]);
  }
}

function config(policy: string, replicas: number, stopAtMs: number): SimConfig {
  return {
    workload:
      tracePath !== undefined
        ? { kind: 'trace', path: tracePath, rateScale: 1 }
        : { kind: 'synthetic', name: workloadName },
    seed,
    durationMs: durationS === undefined ? undefined : durationS * 1000,
    // The CLI's default warm-up: min(60 s, duration / 10).
    warmupMs: Math.min(60, (durationS ?? 600) / 10) * 1000,
    replicas,
    engine: ENGINE_DEFAULTS,
    router: { policy, index: 'events', queueSource: 'ledger', policyOptions },
    view: { staleMs: 0, reportMs: 100, eventDelayMs: 0 },
    faults: [],
    slo: { ttftP99Ms: stopAtMs, tpotP99Ms: tpotSloMs },
    earlyStop: true,
  };
}

/** Met, missed, or unknown (a run that stopped early against a tighter SLO). */
function meets(rec: RunRecord, sloMs: number): boolean | undefined {
  if (rec.stoppedEarly) return sloMs <= rec.stopAtMs ? false : undefined;
  return (
    rec.errors === 0 && rec.measured > 0 && rec.ttftP99Ms <= sloMs && rec.tpotP99Ms <= tpotSloMs
  );
}

/** A run at `replicas` that decides `sloMs`, from the cache or simulated (stopping at `stopAtMs`). */
function probe(policy: string, replicas: number, sloMs: number, stopAtMs = sloMs): RunRecord {
  const key = keyOf(policy);
  const known = cache.get(`${key}#${replicas}`) ?? [];
  const decisive = known.find((r) => meets(r, sloMs) !== undefined);
  if (decisive) return decisive;
  const t0 = performance.now();
  const task = progress.task(`${policy} x ${replicas}`);
  const result = simulate({
    ...config(policy, replicas, stopAtMs),
    onProgress: (f) => task.update(f),
  });
  task.end();
  const rec: RunRecord = {
    key,
    replicas,
    stopAtMs,
    stoppedEarly: result.stoppedEarly,
    ttftP99Ms: result.ttftMs.p99,
    ttftP50Ms: result.ttftMs.p50,
    tpotP99Ms: result.tpotMs.p99,
    errors: result.errors,
    measured: result.ttftMs.count,
    hitRate: result.hitRate,
    utilization: result.utilization.mean,
    decisions: result.router.decisions ?? 0,
    spills: result.router.spills ?? 0,
    wallMs: Math.round(performance.now() - t0),
  };
  mkdirSync(dirname(cachePath), { recursive: true });
  appendFileSync(cachePath, `${JSON.stringify(rec)}\n`);
  cache.set(`${key}#${replicas}`, [...known, rec]);
  progress.done();
  process.stderr.write(`${describe(policy, rec)}\n`);
  return rec;
}

function describe(policy: string, r: RunRecord): string {
  const ttft = r.stoppedEarly ? `> ${r.stopAtMs} (stopped)` : `${Math.round(r.ttftP99Ms)}`;
  return (
    `${policy.padEnd(16)} x${String(r.replicas).padStart(3)}  TTFT p99 ${ttft.padStart(8)} ms` +
    `  TPOT p99 ${r.tpotP99Ms.toFixed(1).padStart(6)} ms  hit ${(100 * r.hitRate).toFixed(1)} %` +
    `  spills ${r.spills}/${r.decisions}  util ${(100 * r.utilization).toFixed(1)} %` +
    `  (${(r.wallMs / 1000).toFixed(1)} s)`
  );
}

/** Fewest replicas in (lo, hi] meeting `sloMs`, given lo misses and hi meets (bisection). */
function bisect(policy: string, sloMs: number, lo: number, hi: number): number {
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (meets(probe(policy, mid, sloMs), sloMs)) hi = mid;
    else lo = mid;
  }
  return hi;
}

/** Fewest replicas meeting `sloMs` above `from` (which misses), by doubling then bisection. */
function searchAbove(policy: string, sloMs: number, from: number): number | null {
  let lo = from;
  while (lo < maxReplicas) {
    const hi = Math.min(maxReplicas, lo * 2);
    if (meets(probe(policy, hi, sloMs), sloMs)) return bisect(policy, sloMs, lo, hi);
    lo = hi;
  }
  return null;
}

interface PolicyRow {
  policy: string;
  /** Fewest replicas per SLO (ms) meeting it; null: none up to `maxReplicas`. */
  minReplicas: Record<number, number | null>;
  /** Per SLO: counts above the fewest that miss it. */
  nonMonotone: Record<number, number[]>;
  runs: RunRecord[];
}

function sweep(policy: string): PolicyRow {
  progress.phase(policy, { unit: 'runs', of: 'simulated time' });
  const start = Math.min(16, toReplicas);
  let loose: number | null;
  if (meets(probe(policy, start, loosest), loosest)) {
    let lo = 0;
    let hi = start;
    for (let n = Math.floor(start / 2); n >= 1; n = Math.floor(n / 2)) {
      if (!meets(probe(policy, n, loosest), loosest)) {
        lo = n;
        break;
      }
      hi = n;
    }
    loose = bisect(policy, loosest, lo, hi);
  } else {
    loose = searchAbove(policy, loosest, start);
  }
  const minReplicas: Record<number, number | null> = {};
  for (const slo of slos) minReplicas[slo] = null;
  if (loose !== null) {
    let lastFirstMet = loose;
    for (let n = Math.max(1, loose - 1); n <= toReplicas; n++) {
      const rec = probe(policy, n, loosest, loosest);
      for (const slo of slos) {
        if (minReplicas[slo] === null && meets(rec, slo)) {
          minReplicas[slo] = n;
          lastFirstMet = n;
        }
      }
      if (slos.every((s) => minReplicas[s] !== null) && n >= lastFirstMet + margin) break;
    }
    for (const slo of slos) {
      if (minReplicas[slo] === null) minReplicas[slo] = searchAbove(policy, slo, toReplicas);
    }
  }
  const runs = [...cache.entries()]
    .filter(([k]) => k.startsWith(`${keyOf(policy)}#`))
    .map(([, recs]) => recs.find((r) => !r.stoppedEarly) ?? recs.at(-1)!)
    .sort((a, b) => a.replicas - b.replicas);
  const nonMonotone: Record<number, number[]> = {};
  for (const slo of slos) {
    const m = minReplicas[slo];
    nonMonotone[slo] =
      m === null || m === undefined
        ? []
        : runs.filter((r) => r.replicas > m && meets(r, slo) === false).map((r) => r.replicas);
  }
  return { policy, minReplicas, nonMonotone, runs };
}

if (values.at !== undefined) {
  const counts = values.at.split(',').map((s) => positiveInt('at', s, 0));
  for (const policy of policies) {
    for (const n of counts)
      process.stdout.write(`${describe(policy, probe(policy, n, loosest))}\n`);
  }
  process.exit(0);
}

const rows = policies.map(sweep);
const cell = (row: PolicyRow, slo: number): string => {
  const m = row.minReplicas[slo];
  if (m === null || m === undefined) return `never (≤ ${maxReplicas})`;
  const odd = row.nonMonotone[slo] ?? [];
  return odd.length > 0 ? `${m} (misses at ${odd.join(', ')})` : String(m);
};
if (values.json) {
  process.stdout.write(
    `${JSON.stringify({ workload: workloadTag, durationS: durationS ?? null, seed, policyOptions, slos, rows })}\n`,
  );
} else {
  const best = (slo: number): number | null => {
    const ms = rows
      .map((r) => r.minReplicas[slo])
      .filter((m): m is number => typeof m === 'number');
    return ms.length > 0 ? Math.min(...ms) : null;
  };
  const lines = [
    `workload ${workloadTag}, ${durationS === undefined ? 'whole trace' : `${durationS} s`}, seed ${seed}, TPOT p99 <= ${tpotSloMs} ms`,
    '',
    `| SLO TTFT p99 | ${rows.map((r) => r.policy).join(' | ')} |`,
    `| --- | ${rows.map(() => '---').join(' | ')} |`,
    ...slos.map((slo) => {
      const b = best(slo);
      const cells = rows.map((r) => {
        const text = cell(r, slo);
        return r.minReplicas[slo] === b && b !== null ? `**${text}**` : text;
      });
      return `| ${slo.toLocaleString('en-US')} ms | ${cells.join(' | ')} |`;
    }),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}
