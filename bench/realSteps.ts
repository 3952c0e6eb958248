/**
 * Where the simulator's TTFT departs from a real engine's, step by step: one llama.cpp engine in
 * this process (the tiny model, `--threads 1`, bench:real's fidelity engine: budget 256, 4
 * sequences, 1,024 blocks of 16), `calibrate --step-table`'s probes against it, then the fidelity
 * trace sent to it; every step the engine ran is printed beside the fitted table's time for the
 * same plan (what `kvroute sim --profile` charges it), with the placement time (state copies,
 * erasures) inside it. Then `kvroute sim --profile` of the same trace (bench:real's fidelity
 * flags), its own steps and each request's TTFT beside the live one: where the two runs part.
 * `GLIBC_TUNABLES=glibc.malloc.hugetlb=1 node --import tsx bench/realSteps.ts [--calibrate-s 120]
 * [--requests 16]` (the engine runs in this process: the tunable puts it on huge pages as
 * `kvroute engine --runtime llama.cpp` is, docs/real-engine.md); one JSON line per
 * step (`run: live` or `sim`) and per request (`request`) on stdout, the totals and the host's
 * load average on stderr.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { liveProfile, measureLive } from '../src/calibrate/live.ts';
import { writeProfile } from '../src/calibrate/profileFile.ts';
import { parseSimFlags } from '../src/cli/sim.ts';
import type { StepResult } from '../src/engine/types.ts';
import type { RequestRecord } from '../src/results/requestRecord.ts';
import type { FleetRequestRecord } from '../src/sim/fleet.ts';
import { simulate } from '../src/sim/run.ts';
import { contextPairRate, contextPairRates } from '../src/calibrate/pairRate.ts';
import { startEngineServer } from '../src/engine/server/server.ts';
import { runBench } from '../src/loadgen/run.ts';
import { makeReplicaSpec, tableStepMs } from '../src/model/index.ts';
import type { StepPlan } from '../src/scheduler/types.ts';
import { makeSyntheticTrace } from '../src/workload/trace.ts';
import { tinyModelPath } from '../test/support/tinyModel.ts';
import { benchFlags, readBenchArgs } from './flags.ts';

const values = readBenchArgs('realSteps', {
  'calibrate-s': { type: 'string' },
  requests: { type: 'string' },
});
const flags = benchFlags('realSteps');
const CALIBRATE_S = flags.positiveNumber('calibrate-s', values['calibrate-s'], 120);
const REQUESTS = flags.positiveInt('requests', values.requests, 16);
const BUDGET = 256;
const log = (line: string) => process.stderr.write(`${line}\n`);

interface Step {
  endMs: number;
  durationMs: number;
  placementMs: number;
  plan: StepPlan;
  /** Prompt chunks that sampled a first token in this step. */
  promptSamples: number;
}
const steps: Step[] = [];
let recording = false;
const server = await startEngineServer({
  host: '127.0.0.1',
  port: 0,
  runtime: 'llama.cpp',
  budgetTokens: BUDGET,
  maxSeqs: 4,
  kvBlocks: 1024,
  blockSize: 16,
  servedModelName: 'tiny',
  llamaCpp: {
    gguf: await tinyModelPath(),
    threads: 1,
    onStep: (result, executed) => {
      if (!recording) return;
      steps.push({
        endMs: performance.now(),
        durationMs: executed.durationMs,
        placementMs: executed.placementMs,
        plan: result.plan as StepPlan,
        promptSamples: result.emitted.filter((t) => t.index === 0).length,
      });
    },
  },
});
/** A plan's entries as `prefill256@512+admit` (kind, tokens, context before them). */
const entriesOf = (p: StepPlan): string[] =>
  p.entries.map(
    (e) => `${e.kind}${e.tokens}@${e.contextTokens}${p.admitted.includes(e.id) ? '+admit' : ''}`,
  );
/** Waits (at most 30 s) until the engine has nothing running or waiting. */
async function waitIdle(): Promise<void> {
  for (let i = 0; i < 300; i++) {
    const text = await (await fetch(`${server.url}/metrics`)).text();
    const busy = /^vllm:num_requests_(?:running|waiting)(?:\{[^}]*\})? ([0-9.e+]+)$/gm;
    let n = 0;
    for (const m of text.matchAll(busy)) n += Number(m[1]);
    if (n === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
const dir = mkdtempSync(join(tmpdir(), 'kvroute-real-steps-'));
try {
  log(`load average ${loadavg()[0]!.toFixed(1)}; calibrating for ${CALIBRATE_S} s`);
  const m = await measureLive({
    url: server.url,
    model: null,
    apiKey: null,
    budgetTokens: BUDGET,
    speedup: 1,
    budgetS: CALIBRATE_S,
    maxPromptTokens: 1536,
    maxBatch: 4,
    repeats: 3,
    stepTable: true,
  });
  for (const o of m.observations) log(`  ${o.label}: ${o.measuredMs.toFixed(1)} ms`);
  // The table `kvroute calibrate --step-table` writes for these measurements.
  const profile = liveProfile(m, makeReplicaSpec({ model: 'llama-3.1-8b', tp: 1 }), {
    url: server.url,
    budgetTokens: BUDGET,
    speedup: 1,
    stepTable: true,
  });
  const fit = profile.curves[0]!.table!;
  log(
    `pair rate: paired ${contextPairRate(m.warmColdPairs)} ms (${m.warmColdPairs.length} pairs), by context ${JSON.stringify(contextPairRates(m.warmColdPairs))}; ${m.tilePairs.length} tile pairs`,
  );
  log(`table ${JSON.stringify(fit)}`);
  // The calibration's last streams may still be running: start the trace on an idle engine.
  await waitIdle();
  const trace = join(dir, 'trace.jsonl');
  writeFileSync(
    trace,
    makeSyntheticTrace({
      seed: 27,
      ratePerS: 0.5,
      roots: 6,
      sharedBlocks: 2,
      maxUniqueBlocks: 1,
      outputTokens: 2,
      requests: REQUESTS,
    }),
  );
  recording = true;
  const t0 = performance.now();
  const liveRequests: RequestRecord[] = [];
  const live = await runBench({
    onRequest: (r) => liveRequests.push(r),
    url: server.url,
    workload: { kind: 'trace', path: trace, rateScale: 0.5 },
    seed: 1,
    durationMs: undefined,
    warmupMs: 0,
    speedup: 1,
    concurrency: Number.POSITIVE_INFINITY,
    model: null,
    apiKey: null,
    label: 'live',
    replicas: 1,
  });
  recording = false;
  let liveMs = 0;
  let tableMs = 0;
  for (const s of steps) {
    const p = s.plan;
    const simMs = tableStepMs(fit, { ...p, promptSamples: s.promptSamples });
    liveMs += s.durationMs;
    tableMs += simMs;
    process.stdout.write(
      `${JSON.stringify({ run: 'live', atMs: Math.round(s.endMs - t0), liveMs: +s.durationMs.toFixed(1), placementMs: +s.placementMs.toFixed(1), tableMs: +simMs.toFixed(1), entries: entriesOf(p) })}\n`,
    );
  }
  // The simulator on the same trace with the fitted profile, as bench:real runs it.
  const profilePath = join(dir, 'profile.yaml');
  writeProfile(profilePath, profile);
  const parsed = parseSimFlags([
    ...['--trace', trace, '--rate-scale', '0.5', '--replicas', '1', '--policy', 'delay-cost'],
    ...['--model', 'llama-3.1-8b', '--tp', '1', '--gpu', 'h200', '--budget', String(BUDGET)],
    ...['--max-seqs', '4', '--kv-blocks', '1024', '--block-size', '16', '--warmup', '0'],
    ...['--profile', profilePath, '--stale-ms', '1', '--report-ms', '100', '--event-delay-ms', '0'],
    '--quiet',
  ]);
  if (parsed === 'help') throw new Error('sim flags');
  const simRequests: FleetRequestRecord[] = [];
  let simAtMs = 0;
  const sim = simulate({
    ...parsed.base,
    onRequest: (r) => simRequests.push(r),
    instrument: {
      engine: (e) => ({
        add: (req) => e.add(req),
        hasWork: () => e.hasWork(),
        abort: (id) => e.abort(id),
        counters: () => e.counters(),
        step: (): StepResult => {
          const result = e.step();
          simAtMs += result.durationMs;
          const plan = result.plan as StepPlan;
          if (plan.entries.length > 0) {
            process.stdout.write(
              `${JSON.stringify({ run: 'sim', busyMs: Math.round(simAtMs), tableMs: +result.durationMs.toFixed(1), entries: entriesOf(plan) })}\n`,
            );
          }
          return result;
        },
      }),
    },
  });
  const byId = new Map(simRequests.map((r) => [r.id, r]));
  for (const l of [...liveRequests].sort((a, b) => a.id - b.id)) {
    const r = byId.get(l.id);
    process.stdout.write(
      `${JSON.stringify({ run: 'request', id: l.id, promptTokens: l.promptTokens, cached: [l.cachedTokens, r?.cachedTokens ?? null], ttftMs: [l.ttftMs === null ? null : +l.ttftMs.toFixed(1), r?.ttftMs == null ? null : +r.ttftMs.toFixed(1)] })}\n`,
    );
  }
  log(`sim TTFT p50 ${sim.ttftMs.p50.toFixed(0)} p99 ${sim.ttftMs.p99.toFixed(0)} ms`);
  log(
    `live TTFT p50 ${live.ttftMs.p50.toFixed(0)} p99 ${live.ttftMs.p99.toFixed(0)} ms; ${steps.length} steps: live ${liveMs.toFixed(0)} ms, table ${tableMs.toFixed(0)} ms; load average ${loadavg()[0]!.toFixed(1)}`,
  );
} finally {
  await server.close();
  rmSync(dir, { recursive: true, force: true });
}
// llama.cpp's worker threads may outlive the server's close by a while.
process.exit(0);
