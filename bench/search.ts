/**
 * Replica search, serial against parallel: `kvroute sim --search --policy all` on the seed
 * workload (300 s, seed 1), once in this thread (`--threads 1`) and once on worker threads, in
 * alternating order, BENCH_RUNS times each (default 1; `--runs N`). Prints the median wall time of
 * each and their ratio; every parallel result must equal the serial one byte for byte (checked).
 *
 *   npm run bench:search -- --json
 *   npm run bench:search -- --threads 8 --policy cost,llmd --duration 120 --runs 3
 *
 * `--json`: {"serialS", "parallelS", "speedup", "threads", "runs", "simulations", ...}; speedup =
 * serialS / parallelS. `simulations` counts every simulation started; the parallel search also
 * runs counts it may need next, and cancels those it did not (`cancelled`).
 */
import { availableParallelism } from 'node:os';
import { benchFlags, readBenchArgs } from './flags.ts';
import { ENGINE_DEFAULTS } from '../src/engine/options.ts';
import { resultsJson } from '../src/results/result.ts';
import { DEFAULT_SLO } from '../src/results/slo.ts';
import { type BatchResult, runBatch } from '../src/sim/parallel.ts';
import type { SimConfig } from '../src/sim/run.ts';

const values = readBenchArgs('bench:search', {
  json: { type: 'boolean' },
  policy: { type: 'string' },
  duration: { type: 'string' },
  threads: { type: 'string' },
  runs: { type: 'string' },
  replicas: { type: 'string' },
});

const { fail, positiveInt, policies: readPolicies } = benchFlags('bench:search');

const policies = readPolicies(values.policy);
const durationS = positiveInt('duration', values.duration, 300);
const threads = positiveInt('threads', values.threads, availableParallelism());
const runs = positiveInt('runs', values.runs ?? process.env.BENCH_RUNS, 1);
const replicas = positiveInt('replicas', values.replicas, 22);

/** `kvroute sim --workload seed --duration D --policy P --search`'s runs, as the CLI builds them. */
function config(policy: string): SimConfig {
  return {
    workload: { kind: 'synthetic', name: 'seed' },
    seed: 1,
    durationMs: durationS * 1000,
    warmupMs: Math.min(60, durationS / 10) * 1000,
    replicas,
    engine: ENGINE_DEFAULTS,
    router: { policy, index: 'events', queueSource: 'ledger' },
    view: { staleMs: 0, reportMs: 100, eventDelayMs: 0 },
    faults: [],
    slo: { ...DEFAULT_SLO },
  };
}

async function timed(n: number): Promise<{ wallS: number; batch: BatchResult; json: string }> {
  const t0 = performance.now();
  const batch = await runBatch({
    runs: policies.map(config),
    searches: policies.map((policy) => ({ label: policy, config: config(policy) })),
    bounds: { start: replicas, max: 256 },
    threads: n,
  });
  const wallS = (performance.now() - t0) / 1000;
  process.stderr.write(
    `threads ${n}: ${wallS.toFixed(1)} s, ${batch.work.simulations} simulations` +
      ` (${batch.work.cancelled} cancelled)\n`,
  );
  return { wallS, batch, json: resultsJson(batch.results, batch.search) };
}

const median = (v: number[]): number => {
  const s = [...v].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)]!;
};

const serial: number[] = [];
const parallel: number[] = [];
let work = { serial: 0, parallel: 0, cancelled: 0 };
for (let i = 0; i < runs; i++) {
  // Alternate which goes first, so neither always meets a warmer or a busier machine.
  const order = i % 2 === 0 ? [1, threads] : [threads, 1];
  const [a, b] = [await timed(order[0]!), await timed(order[1]!)];
  const [one, many] = order[0] === 1 ? [a, b] : [b, a];
  if (one.json !== many.json) fail(`threads ${threads} gave other bytes than threads 1`);
  serial.push(one.wallS);
  parallel.push(many.wallS);
  work = {
    serial: one.batch.work.simulations,
    parallel: many.batch.work.simulations,
    cancelled: many.batch.work.cancelled,
  };
}
const serialS = median(serial);
const parallelS = median(parallel);
const out = {
  serialS: Math.round(serialS * 10) / 10,
  parallelS: Math.round(parallelS * 10) / 10,
  speedup: Math.round((serialS / parallelS) * 100) / 100,
  threads,
  cores: availableParallelism(),
  runs,
  policies: policies.length,
  durationS,
  simulations: work,
  identical: true,
};
if (values.json) process.stdout.write(`${JSON.stringify(out)}\n`);
else {
  process.stdout.write(
    `search, ${policies.length} policies, seed ${durationS} s: serial ${out.serialS} s, ` +
      `${threads} threads ${out.parallelS} s (x${out.speedup}, ${out.parallelS / out.serialS < 1 ? Math.round((100 * out.parallelS) / out.serialS) : 100} % of serial); ` +
      `${work.serial} / ${work.parallel} simulations (${work.cancelled} cancelled)\n`,
  );
}
