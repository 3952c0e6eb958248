/**
 * Real engine benchmarks: llama.cpp (`kvroute engine --runtime llama.cpp`, the tiny model,
 * `--threads 1`, at most two engines at once) behind kvroute's gateway, every server a process.
 * `npm run bench:real [-- --json] [-- --quick] [-- --runtime sim] [-- --only fidelity]
 * [-- --fidelity-requests N] [-- --fidelity-runs N]` prints one
 * JSON object (`--only fidelity`: the fidelity figure alone, one engine, a few minutes):
 *
 * - warmTtftMs.p50 / coldTtftMs.p50: conversations through the gateway over two engines
 *   (delay-cost): a cold prompt of fresh token ids, then a first turn, then its second turn
 *   (the first turn's prompt plus 64 new tokens), which the gateway sends to the engine holding
 *   the first turn's KV; the cold prompt has the second turn's length. Target: warm <= 0.5 x cold.
 * - routing: a seed-like trace scaled to the tiny model (6 customers with 1,024-token shared
 *   prefixes, 1 / rank popularity, prompts of 1,025 to 1,536 tokens, 1 to 4 output tokens,
 *   0.5 req/s; 320 KV blocks per engine, too few for every prefix on both) through the gateway over
 *   two engines: delay-cost on the engines that served warm/cold (their cache holds none of the
 *   trace's prefixes), told what a decode costs on them (`--decode-cost-tokens`, from the
 *   fidelity step's calibrated table, which runs first), random on fresh ones. Target:
 *   delay-cost's TTFT p99 below random's.
 * - stall: one engine, two streams decoding while ~4k-token prompts arrive one after another, at
 *   --budget 256 and 4096: p99 of the running streams' inter-token gaps in that window
 *   (runningTpotP99Ms). The scheduler seed's claim: the small budget bounds the stall.
 * - fidelity: on the budget-256 engine, `kvroute calibrate --url --step-table`, then the routing
 *   trace's arrivals at half the rate sent straight to that engine (the load generator), and
 *   `kvroute sim --trace --profile` of the same trace, fleet (1), budget, sequences and pool.
 *   Target: TTFT p50 and p99 within 15 %. The simulated TTFTs include the profile's request
 *   overhead (`requestOverheadMs`: HTTP, tokenization, the hand-off to the step loop).
 *   `hostStealPct`: the share of the host's CPU time its hypervisor took during the calibration
 *   and the live run (/proc/stat), which slows a real engine's steps as no cost model can know.
 *   `--fidelity-runs N` repeats the whole figure (calibration included) on fresh engines and
 *   judges the median of each error over the runs.
 * - loadAverage: the host's 1-minute load average at the start and the end (the figures are
 *   load-sensitive on a shared machine).
 *
 * `--runtime sim` runs the same stacks on simulated engines: a check of the plumbing, whose
 * figures are the cost model's, not a real engine's. Every child is stopped at the end.
 */
import type { ChildProcess } from 'node:child_process';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { readProfile } from '../src/calibrate/profileFile.ts';
import { decodeCostTokensOf } from '../src/model/stepTable.ts';
import { openClient, runBench } from '../src/loadgen/run.ts';
import { streamCompletion } from '../src/loadgen/sse.ts';
import { killAll, readyLine, spawnKvroute, stopChild } from '../src/loadgen/stack.ts';
import { Rng } from '../src/util/rng.ts';
import { makeSyntheticTrace } from '../src/workload/trace.ts';
import { tinyModelPath } from '../test/support/tinyModel.ts';
import { LLAMA3_DIR } from '../test/support/tokenizerFixtures.ts';
import {
  type CpuTicks,
  cpuTicksOf,
  fidelityFigure,
  fidelityOverRuns,
  gapsInWindow,
  routingFigure,
  runFigures,
  type StallRun,
  stealPct,
  stallFigure,
  parseRealArgs,
  type WarmColdSample,
  warmColdFigure,
} from './realFigures.ts';

const args = parseRealArgs(process.argv.slice(2));
if (typeof args === 'string') {
  process.stderr.write(`bench:real: ${args}\n`);
  process.exit(2);
}
const {
  json: JSON_OUT,
  quick: QUICK,
  runtime: RUNTIME,
  only: ONLY,
  fidelityRuns: FIDELITY_RUNS,
} = args;
const BIN = fileURLToPath(new URL('../bin/kvroute.js', import.meta.url));
const execFileAsync = promisify(execFile);

const BLOCK_SIZE = 16;
/** The routing engines: a few sequences, a pool too small for every customer's prefix. */
const ENGINE = { budget: 512, maxSeqs: 4, kvBlocks: 320 };
/** The stall's small budget; the fidelity engine runs at it too (prompts of 1 to 6 chunks). */
const SMALL_ENGINE = { budget: 256, maxSeqs: 4, kvBlocks: 1024 };
const LARGE_BUDGET = 4096;
const SIZES = QUICK
  ? { conversations: 3, longPrompts: 1, routingRequests: 20, fidelityRequests: 16, calibrateS: 60 }
  : {
      conversations: 5,
      longPrompts: 2,
      routingRequests: 40,
      fidelityRequests: 24,
      calibrateS: 120,
    };
// A p99 of 24 requests is about their largest: --fidelity-requests gives it more.
if (args.fidelityRequests !== null) SIZES.fidelityRequests = args.fidelityRequests;
const LONG_PROMPT_TOKENS = 3900;
const TURN_TOKENS = 1024;
const FOLLOW_UP_TOKENS = 64;
/** The routing trace: a few customers with shared prefixes, as the seed has 200 of them. */
const TRACE = {
  seed: 27,
  ratePerS: 0.5,
  roots: 6,
  sharedBlocks: 2,
  maxUniqueBlocks: 1,
  outputTokens: 2,
};
/** The routing trace's longest prompt: 2 shared blocks of 512 plus at most 1 unique block. */
const FIDELITY_MAX_PROMPT_TOKENS = 1536;
/** The fidelity run: the same trace at half the rate, on one engine. */
const FIDELITY_RATE_SCALE = 0.5;
/** The sim's view of a live gateway (src/loadgen/compare.ts): reports every scrape, events at once. */
const SIM_VIEW = ['--stale-ms', '1', '--report-ms', '100', '--event-delay-ms', '0'];
/** Catalog names for the profile and the sim; a step table's times do not depend on them. */
const CATALOG = ['--tp', '1', '--gpu', 'h200'];

const log = (line: string) => process.stderr.write(`${JSON_OUT ? 'bench:real: ' : ''}${line}\n`);

interface EngineShape {
  budget: number;
  maxSeqs: number;
  kvBlocks: number;
}

interface Engine {
  url: string;
  events: string;
  replay: string;
  child: ChildProcess;
}

let model = '';
/** Every child started, stopped at the end whatever happens. */
const children = new Set<ChildProcess>();

function runtimeArgs(): string[] {
  return RUNTIME === 'llama.cpp'
    ? ['--runtime', 'llama.cpp', '--gguf', model, '--threads', '1']
    : ['--model', 'llama-3.1-8b', ...CATALOG];
}

async function startEngine(o: EngineShape & { seed: number }): Promise<Engine> {
  const child = spawnKvroute([
    'engine',
    '--port',
    '0',
    ...runtimeArgs(),
    '--budget',
    String(o.budget),
    '--max-seqs',
    String(o.maxSeqs),
    '--block-size',
    String(BLOCK_SIZE),
    '--kv-blocks',
    String(o.kvBlocks),
    '--kv-events',
    'tcp://127.0.0.1:*',
    '--kv-replay',
    'tcp://127.0.0.1:*',
    '--seed',
    String(o.seed),
  ]);
  children.add(child);
  const line = await readyLine(child, /^kvroute engine ready (.*)$/);
  const field = (name: string) => new RegExp(`${name}=(\\S+)`).exec(line)?.[1] ?? '-';
  return { url: field('url'), events: field('events'), replay: field('replay'), child };
}

async function startGateway(
  engines: Engine[],
  policy: string,
  extra: string[] = [],
): Promise<string> {
  const child = spawnKvroute([
    'serve',
    '--port',
    '0',
    '--policy',
    policy,
    ...extra,
    '--block-size',
    String(BLOCK_SIZE),
    ...(RUNTIME === 'llama.cpp' ? ['--tokenizer', LLAMA3_DIR] : []),
    ...engines.flatMap((e) => [
      '--backend',
      [
        e.url,
        ...(e.events !== '-' ? [`events=${e.events}`] : []),
        ...(e.replay !== '-' ? [`replay=${e.replay}`] : []),
      ].join(','),
    ]),
  ]);
  children.add(child);
  const line = await readyLine(child, /^kvroute serve listening on (\S+)/);
  return /listening on (\S+)/.exec(line)![1]!;
}

async function stopAll(): Promise<void> {
  const all = [...children];
  children.clear();
  await Promise.all(all.map(stopChild));
}

/** Two engines (started side by side) and a gateway in front of them. */
async function startPair(policy: string, extra: string[] = []): Promise<string> {
  const engines = await Promise.all([0, 1].map((seed) => startEngine({ ...ENGINE, seed })));
  return startGateway(engines, policy, extra);
}

const rng = Rng.derive(27, 'bench-real');
const freshIds = (n: number): number[] => Array.from({ length: n }, () => rng.range(1000, 29_999));

async function send(
  url: string,
  prompt: number[],
  maxTokens: number,
  signal?: AbortSignal,
  onToken?: (tokens: number) => void,
) {
  const { dispatcher, close } = openClient();
  try {
    const out = await streamCompletion({
      url,
      prompt,
      maxTokens,
      model: null,
      apiKey: null,
      dispatcher,
      ...(signal && { signal }),
      ...(onToken && { onToken }),
    });
    if (out.error !== null && out.error !== 'cancelled') {
      throw new Error(`${url}: ${out.error} ${out.detail ?? ''}`);
    }
    // A one-token answer whose token has no text yet (a partial UTF-8 character): it ended with it.
    if (out.tokenTimes.length === 0 && maxTokens === 1 && (out.completionTokens ?? 0) > 0) {
      out.tokenTimes.push(out.endAt);
    }
    return out;
  } finally {
    await close();
  }
}

const ttftOf = (o: { sentAt: number; tokenTimes: number[] }) => o.tokenTimes[0]! - o.sentAt;

async function warmCold(url: string) {
  log(`warm/cold: ${SIZES.conversations} conversations through the gateway over 2 engines`);
  await send(url, freshIds(64), 2); // warm-up
  const samples: WarmColdSample[] = [];
  for (let i = 0; i < SIZES.conversations; i++) {
    const cold = await send(url, freshIds(TURN_TOKENS + FOLLOW_UP_TOKENS), 1);
    const first = freshIds(TURN_TOKENS);
    await send(url, first, 2);
    // The first turn's KV events reach the gateway's index within milliseconds.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const second = await send(url, [...first, ...freshIds(FOLLOW_UP_TOKENS)], 1);
    samples.push({
      warmTtftMs: ttftOf(second),
      coldTtftMs: ttftOf(cold),
      warmCachedTokens: second.cachedTokens,
      promptTokens: TURN_TOKENS + FOLLOW_UP_TOKENS,
    });
    log(
      `  conversation ${i + 1}: warm ${ttftOf(second).toFixed(0)} ms (cached ${second.cachedTokens}), cold ${ttftOf(cold).toFixed(0)} ms`,
    );
  }
  return warmColdFigure(samples);
}

/** Two streams decoding on one engine while long prompts arrive one after another. */
async function stallOn(url: string, budget: number): Promise<StallRun> {
  await send(url, freshIds(64), 2);
  const stop = new AbortController();
  // The long prompts go once both streams have a few tokens: they are decoding.
  let decoding = 0;
  let bothDecode: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => {
    bothDecode = resolve;
  });
  const counts = [0, 0];
  let onCount: () => void = () => undefined;
  const streams = [0, 1].map((i) =>
    send(url, freshIds(64), 3000, stop.signal, (tokens) => {
      counts[i] = tokens;
      onCount();
      if (tokens === 3 && ++decoding === 2) bothDecode();
    }),
  );
  // A stream that ends or fails first ends the wait too (no hang; Promise.all below reports it).
  await Promise.race([ready, ...streams]);
  const from = performance.now();
  const longTtftMs: number[] = [];
  let to = from;
  for (let i = 0; i < SIZES.longPrompts; i++) {
    const long = await send(url, freshIds(LONG_PROMPT_TOKENS), 1);
    longTtftMs.push(ttftOf(long));
    to = long.tokenTimes[0]!;
  }
  // The streams' tokens of the step that ended the last prompt's prefill close the stall's
  // gap: wait for one more token from each (at most 10 s) before stopping them.
  const seen = [...counts];
  await Promise.race([
    new Promise<void>((resolve) => {
      onCount = () => {
        if (counts.every((c, i) => c > seen[i]!)) resolve();
      };
    }),
    new Promise((resolve) => setTimeout(resolve, 10_000)),
    ...streams,
  ]);
  stop.abort();
  const outcomes = await Promise.all(streams);
  const gapsMs = gapsInWindow(
    outcomes.map((o) => o.tokenTimes),
    from,
    to,
  );
  log(
    `  budget ${budget}: ${gapsMs.length} gaps, long prompts' TTFT ${longTtftMs.map((x) => x.toFixed(0)).join(', ')} ms`,
  );
  return { budget, gapsMs, longTtftMs, longPromptTokens: LONG_PROMPT_TOKENS };
}

function writeTrace(dir: string, requests: number): string {
  const path = join(dir, `tiny-${requests}.jsonl`);
  writeFileSync(path, makeSyntheticTrace({ ...TRACE, requests }));
  return path;
}

async function liveRun(
  url: string,
  trace: string,
  rateScale: number,
  label: string,
  replicas: number,
) {
  const result = await runBench({
    url,
    workload: { kind: 'trace', path: trace, rateScale },
    seed: 1,
    durationMs: undefined,
    warmupMs: 0,
    speedup: 1,
    concurrency: Number.POSITIVE_INFINITY,
    model: null,
    apiKey: null,
    label,
    replicas,
  });
  log(
    `  ${label}: TTFT p50 ${result.ttftMs.p50.toFixed(0)} p99 ${result.ttftMs.p99.toFixed(0)} ms, hit rate ${result.hitRate?.toFixed(3)}, ${result.completed} done, ${result.errors} errors, ${result.wallS.toFixed(0)} s`,
  );
  return result;
}

async function kvroute(args: string[]): Promise<string> {
  const { stdout } = await execFileAsync(process.execPath, [BIN, ...args], {
    maxBuffer: 64 << 20,
  });
  return stdout;
}

function calibrateArgs(url: string, profile: string): string[] {
  return [
    'calibrate',
    '--url',
    url,
    '--step-table',
    '--budget',
    String(SMALL_ENGINE.budget),
    '--catalog-model',
    'llama-3.1-8b',
    ...CATALOG,
    '--weights-dtype',
    'bf16',
    '--budget-s',
    String(SIZES.calibrateS),
    // The trace's longest prompt: the warm probes then time chunks after 640 and 1,280 cached
    // tokens, the contexts the live run's chunks see (a pair costs more at 1,024 than at 384).
    '--max-prompt-tokens',
    String(FIDELITY_MAX_PROMPT_TOKENS),
    '--max-batch',
    String(SMALL_ENGINE.maxSeqs),
    '--repeats',
    '3',
    '--out',
    profile,
    '--quiet',
  ];
}

function simArgs(trace: string, profile: string): string[] {
  return [
    'sim',
    '--trace',
    trace,
    '--rate-scale',
    String(FIDELITY_RATE_SCALE),
    '--replicas',
    '1',
    '--policy',
    'delay-cost',
    '--model',
    'llama-3.1-8b',
    ...CATALOG,
    '--budget',
    String(SMALL_ENGINE.budget),
    '--max-seqs',
    String(SMALL_ENGINE.maxSeqs),
    '--kv-blocks',
    String(SMALL_ENGINE.kvBlocks),
    '--block-size',
    String(BLOCK_SIZE),
    '--warmup',
    '0',
    '--profile',
    profile,
    ...SIM_VIEW,
    '--json',
  ];
}

process.once('SIGINT', () => {
  void killAll().then(() => process.exit(130));
});

const dir = mkdtempSync(join(tmpdir(), 'kvroute-bench-real-'));
const startedAt = performance.now();

/**
 * Waits (at most 60 s) until the engine has nothing running or waiting, then for any step still
 * in flight: a client that left (calibrate's last streams, the stall's) may keep it busy for a
 * step or a few, which the next run's first request would wait behind.
 */
async function waitIdle(url: string): Promise<void> {
  const busy = /^vllm:num_requests_(?:running|waiting)(?:\{[^}]*\})? ([0-9.e+]+)$/gm;
  for (let i = 0; i < 600; i++) {
    const text = await (await fetch(`${url}/metrics`)).text();
    let n = 0;
    for (const m of text.matchAll(busy)) n += Number(m[1]);
    if (n === 0) {
      // A left request's step may still be in flight: one 1-token prompt runs after it.
      await send(url, freshIds(1), 1);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`${url}: still busy after 60 s`);
}

/** The host's CPU ticks now (/proc/stat); null off Linux. */
function cpuTicks(): CpuTicks | null {
  try {
    return cpuTicksOf(readFileSync('/proc/stat', 'utf8'));
  } catch {
    return null;
  }
}

/**
 * The fidelity run on the budget-256 engine: calibrate it (its step table in `profile`), then
 * the fidelity trace live, each started on an idle engine, and the sim of the same trace.
 */
async function fidelityOn(small: Engine, profile: string, fidelityTrace: string) {
  log(
    `fidelity: calibrate (${SIZES.calibrateS} s), then ${SIZES.fidelityRequests} requests live and simulated on 1 engine`,
  );
  await waitIdle(small.url);
  const ticksAtCalibrate = cpuTicks();
  const cArgs = calibrateArgs(small.url, profile);
  log(`  kvroute ${cArgs.join(' ').replace(small.url, 'URL')}`);
  const summary = await kvroute(cArgs);
  log(
    summary
      .split('\n')
      .map((l) => `    ${l}`)
      .join('\n'),
  );
  await waitIdle(small.url);
  const loadAtLive = loadavg()[0]!;
  const ticksAtLive = cpuTicks();
  const live = await liveRun(small.url, fidelityTrace, FIDELITY_RATE_SCALE, 'live', 1);
  const loadAfterLive = loadavg()[0]!;
  const ticksAfterLive = cpuTicks();
  const sArgs = simArgs(fidelityTrace, profile);
  log(`  kvroute ${sArgs.join(' ')}`);
  const sim = JSON.parse(await kvroute(sArgs)).results[0];
  log(`  sim: TTFT p50 ${sim.ttftMs.p50.toFixed(0)} p99 ${sim.ttftMs.p99.toFixed(0)} ms`);
  const requestOverheadMs = readProfile(profile).curves[0]!.table?.requestOverheadMs ?? 0;
  return {
    ...fidelityFigure(
      { ttftP50Ms: live.ttftMs.p50, ttftP99Ms: live.ttftMs.p99 },
      { ttftP50Ms: sim.ttftMs.p50, ttftP99Ms: sim.ttftMs.p99 },
      requestOverheadMs,
    ),
    hitRate: { live: live.hitRate, sim: sim.hitRate },
    engine: { ...SMALL_ENGINE, blockSize: BLOCK_SIZE },
    requests: SIZES.fidelityRequests,
    loadAverageLive: { start: loadAtLive, end: loadAfterLive },
    hostStealPct: {
      calibrate: stealPct(ticksAtCalibrate, ticksAtLive),
      live: stealPct(ticksAtLive, ticksAfterLive),
    },
  };
}

/**
 * `--fidelity-runs` fidelity runs: the first on `first`, each later one on a fresh engine (the
 * last run's trace left its prefixes cached, which the sim's empty fleet does not have). One
 * run: its figure; more: their median, each run beside it (fidelityOverRuns).
 */
async function fidelityRuns(first: Engine, profile: string, fidelityTrace: string) {
  const runs = [await fidelityOn(first, profile, fidelityTrace)];
  for (let i = 1; i < FIDELITY_RUNS; i++) {
    await stopChild(first.child);
    children.delete(first.child);
    first = await startEngine({ ...SMALL_ENGINE, seed: i });
    runs.push(await fidelityOn(first, profile, fidelityTrace));
  }
  return runs.length === 1 ? runs[0]! : fidelityOverRuns(runs);
}

try {
  if (RUNTIME === 'llama.cpp') {
    model = await tinyModelPath();
    log(`model: ${model}`);
  }
  const loadAtStart = loadavg()[0]!;
  const profile = join(dir, 'profile.yaml');
  const fidelityTrace = writeTrace(dir, SIZES.fidelityRequests);
  if (ONLY === 'fidelity') {
    const fidelity = await fidelityRuns(
      await startEngine({ ...SMALL_ENGINE, seed: 0 }),
      profile,
      fidelityTrace,
    );
    await stopAll();
    const out = {
      runtime: RUNTIME,
      quick: QUICK,
      only: ONLY,
      fidelity,
      wallS: Math.round((performance.now() - startedAt) / 1000),
      loadAverage: { start: loadAtStart, end: loadavg()[0]! },
    };
    process.stdout.write(
      JSON_OUT ? `${JSON.stringify(out)}\n` : `${JSON.stringify(out, null, 2)}\n`,
    );
  } else {
    const routingTrace = writeTrace(dir, SIZES.routingRequests);

    // One engine at the small budget: the stall, then calibrate and the fidelity run on it.
    log(
      `stall: 2 streams decoding while ${SIZES.longPrompts} x ${LONG_PROMPT_TOKENS}-token prompts arrive`,
    );
    const small = await startEngine({ ...SMALL_ENGINE, seed: 0 });
    const stallRuns = [await stallOn(small.url, SMALL_ENGINE.budget)];
    const fidelity = await fidelityRuns(small, profile, fidelityTrace);
    await stopAll();
    const large = await startEngine({ ...SMALL_ENGINE, budget: LARGE_BUDGET, seed: 0 });
    stallRuns.push(await stallOn(large.url, LARGE_BUDGET));
    await stopAll();

    // What a running decode costs in prompt tokens, from the calibrated table (0 without one).
    const table = readProfile(profile).curves[0]!.table;
    const decodeCostTokens = table ? decodeCostTokensOf(table, SMALL_ENGINE.budget) : 0;
    const routingRuns = [];
    // Two engines and a delay-cost gateway: warm/cold, then the routing trace (fresh prefixes).
    let url = await startPair('delay-cost', [
      '--decode-cost-tokens',
      decodeCostTokens.toFixed(1),
      '--engine-budget',
      String(ENGINE.budget),
    ]);
    const warm = await warmCold(url);
    log(
      `routing: ${SIZES.routingRequests} requests (${TRACE.roots} customers) over 2 engines, a decode = ${decodeCostTokens.toFixed(1)} prompt tokens`,
    );
    routingRuns.push(runFigures(await liveRun(url, routingTrace, 1, 'delay-cost', 2)));
    await stopAll();
    // Fresh engines for random.
    url = await startPair('random');
    routingRuns.push(runFigures(await liveRun(url, routingTrace, 1, 'random', 2)));
    await stopAll();

    const out = {
      runtime: RUNTIME,
      quick: QUICK,
      engine: { ...ENGINE, blockSize: BLOCK_SIZE, threads: RUNTIME === 'llama.cpp' ? 1 : null },
      warmTtftMs: warm.warmTtftMs,
      coldTtftMs: warm.coldTtftMs,
      warmCold: {
        ratio: warm.ratio,
        met: warm.met,
        warmCachedTokensP50: warm.warmCachedTokensP50,
        promptTokens: warm.promptTokens,
      },
      stall: stallFigure(stallRuns),
      routing: {
        ...routingFigure(routingRuns[0]!, routingRuns[1]!),
        decodeCostTokens: Math.round(decodeCostTokens * 10) / 10,
      },
      fidelity,
      wallS: Math.round((performance.now() - startedAt) / 1000),
      loadAverage: { start: loadAtStart, end: loadavg()[0]! },
    };
    process.stdout.write(
      JSON_OUT ? `${JSON.stringify(out)}\n` : `${JSON.stringify(out, null, 2)}\n`,
    );
  }
} finally {
  await stopAll();
  await killAll();
  rmSync(dir, { recursive: true, force: true });
}
