/**
 * Real engine benchmarks: llama.cpp (`kvroute engine --runtime llama.cpp`, the tiny model,
 * `--threads 1`, at most two engines at once) behind kvroute's gateway, as processes.
 * `npm run bench:real [-- --json] [-- --quick] [-- --runtime sim]` prints one JSON object:
 *
 * - warmTtftMs.p50 / coldTtftMs.p50: conversations through the gateway over two engines
 *   (delay-cost): a cold prompt of fresh token ids, then a first turn, then its second turn
 *   (the first turn's prompt plus new tokens), which should be served from the owner's cache;
 *   the cold prompt has the second turn's length. Target: warm <= 0.5 x cold.
 * - stall: one engine, two streams decoding while ~4k-token prompts arrive one after another,
 *   at a small and a large --budget: p99 of the running streams' inter-token gaps in that
 *   window (runningTpotP99Ms). The scheduler seed's claim: the small budget bounds the stall.
 * - routing: a seed-like trace scaled to the tiny model (a few customers with 1,024-token shared
 *   prefixes, Zipf popularity, short answers; kv-blocks too few for every prefix on both
 *   engines) through the gateway over two engines, delay-cost and random, each on fresh engines.
 *   Target: delay-cost's TTFT p99 below random's.
 * - fidelity: `kvroute calibrate --url --step-table` against one engine, then the same trace at
 *   half the rate straight to that engine (`kvroute bench`'s client), and `kvroute sim --trace
 *   --profile` of the same trace, fleet (1), budget and pool. Target: TTFT p50 and p99 within
 *   15 %. `withRequestOverhead` adds the profile's per-request overhead to the simulated TTFTs.
 *
 * `--runtime sim` runs the same stacks on simulated engines (a check of the plumbing: its
 * figures are the cost model's, not a real engine's). Every child is stopped at the end.
 */
import type { ChildProcess } from 'node:child_process';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { readProfile } from '../src/calibrate/profileFile.ts';
import { openClient, runBench } from '../src/loadgen/run.ts';
import { streamCompletion } from '../src/loadgen/sse.ts';
import { killAll, readyLine, spawnKvroute, stopChild } from '../src/loadgen/stack.ts';
import { Rng } from '../src/util/rng.ts';
import { makeSyntheticTrace } from '../src/workload/trace.ts';
import { tinyModelPath } from '../test/support/tinyModel.ts';
import { LLAMA3_DIR } from '../test/support/tokenizerFixtures.ts';
import {
  fidelityFigure,
  gapsInWindow,
  routingFigure,
  runFigures,
  type StallRun,
  stallFigure,
  type WarmColdSample,
  warmColdFigure,
} from './realFigures.ts';

const argv = process.argv.slice(2);
const JSON_OUT = argv.includes('--json');
const QUICK = argv.includes('--quick');
const runtimeAt = argv.indexOf('--runtime');
const RUNTIME = runtimeAt >= 0 ? argv[runtimeAt + 1] : 'llama.cpp';
if (RUNTIME !== 'llama.cpp' && RUNTIME !== 'sim') {
  process.stderr.write(`--runtime must be llama.cpp or sim, got '${RUNTIME}'\n`);
  process.exit(2);
}
const BIN = fileURLToPath(new URL('../bin/kvroute.js', import.meta.url));
const execFileAsync = promisify(execFile);

const BLOCK_SIZE = 16;
/** The engines' shape: a sequence per running request, a small pool. */
const ENGINE = { budget: 512, maxSeqs: 4, kvBlocks: 512 };
const SIZES = QUICK
  ? { conversations: 3, longPrompts: 1, routingRequests: 30, fidelityRequests: 30, calibrateS: 40 }
  : { conversations: 7, longPrompts: 3, routingRequests: 80, fidelityRequests: 60, calibrateS: 90 };
const STALL_BUDGETS = [256, 4096];
const LONG_PROMPT_TOKENS = 3900;
const TURN_TOKENS = 1536;
const FOLLOW_UP_TOKENS = 64;
/** The routing trace: a few customers with shared prefixes, as the seed has 200 of them. */
const TRACE = {
  seed: 27,
  ratePerS: 1.5,
  roots: 6,
  sharedBlocks: 2,
  maxUniqueBlocks: 1,
  outputTokens: 8,
};
/** The sim's view of a live gateway (src/loadgen/compare.ts): reports every scrape, events at once. */
const SIM_VIEW = ['--stale-ms', '1', '--report-ms', '100', '--event-delay-ms', '0'];
/** Catalog names for the profile and the sim; a step table's times do not depend on them. */
const CATALOG = ['--tp', '1', '--gpu', 'h200'];

const log = (line: string) => {
  if (!JSON_OUT) process.stderr.write(`${line}\n`);
  else process.stderr.write(`bench:real: ${line}\n`);
};

interface Engine {
  url: string;
  events: string;
  replay: string;
  child: ChildProcess;
}

let model = '';

function runtimeArgs(): string[] {
  return RUNTIME === 'llama.cpp'
    ? ['--runtime', 'llama.cpp', '--gguf', model, '--threads', '1']
    : ['--model', 'llama-3.1-8b', ...CATALOG];
}

async function startEngine(o: { budget: number; maxSeqs: number; kvBlocks: number; seed: number }) {
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
  const line = await readyLine(child, /^kvroute engine ready (.*)$/);
  const field = (name: string) => new RegExp(`${name}=(\\S+)`).exec(line)?.[1] ?? '-';
  return { url: field('url'), events: field('events'), replay: field('replay'), child } as Engine;
}

async function startGateway(
  engines: Engine[],
  policy: string,
): Promise<{ url: string; child: ChildProcess }> {
  const child = spawnKvroute([
    'serve',
    '--port',
    '0',
    '--policy',
    policy,
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
  const line = await readyLine(child, /^kvroute serve listening on (\S+)/);
  return { url: /listening on (\S+)/.exec(line)![1]!, child };
}

/** Starts `count` engines and a gateway, runs `body`, stops them all. */
async function withStack<T>(
  count: number,
  policy: string,
  engine: { budget: number; maxSeqs: number; kvBlocks: number },
  body: (url: string, engines: Engine[]) => Promise<T>,
): Promise<T> {
  const children: ChildProcess[] = [];
  try {
    const engines: Engine[] = [];
    // One at a time: two model loads at once only slow each other.
    for (let i = 0; i < count; i++) {
      const e = await startEngine({ ...engine, seed: i });
      children.push(e.child);
      engines.push(e);
    }
    const gateway = policy === 'none' ? null : await startGateway(engines, policy);
    if (gateway) children.push(gateway.child);
    return await body(gateway?.url ?? engines[0]!.url, engines);
  } finally {
    await Promise.all(children.map(stopChild));
  }
}

const rng = Rng.derive(27, 'bench-real');
const freshIds = (n: number): number[] => Array.from({ length: n }, () => rng.range(1000, 29_999));

async function send(url: string, prompt: number[], maxTokens: number, signal?: AbortSignal) {
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
    });
    if (out.error !== null && out.error !== 'cancelled') {
      throw new Error(`${url}: ${out.error} ${out.detail ?? ''}`);
    }
    return out;
  } finally {
    await close();
  }
}

const ttftOf = (o: { sentAt: number; tokenTimes: number[] }) => o.tokenTimes[0]! - o.sentAt;

async function warmCold(): Promise<ReturnType<typeof warmColdFigure>> {
  log(`warm/cold: ${SIZES.conversations} conversations through the gateway over 2 engines`);
  return withStack(2, 'delay-cost', ENGINE, async (url) => {
    await send(url, freshIds(64), 2); // warm-up
    const samples: WarmColdSample[] = [];
    for (let i = 0; i < SIZES.conversations; i++) {
      const cold = await send(url, freshIds(TURN_TOKENS + FOLLOW_UP_TOKENS), 1);
      const first = freshIds(TURN_TOKENS);
      await send(url, first, 4);
      // The KV events of the first turn reach the gateway's index within milliseconds.
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
  });
}

async function stallAt(budget: number): Promise<StallRun> {
  const engine = { budget, maxSeqs: 4, kvBlocks: 1024 };
  return withStack(1, 'none', engine, async (url) => {
    await send(url, freshIds(64), 2);
    const stop = new AbortController();
    const streams = [0, 1].map(() => send(url, freshIds(64), 3000, stop.signal));
    // Until both stream: their prompts are short, a few steps.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const from = performance.now();
    const longTtftMs: number[] = [];
    let to = from;
    for (let i = 0; i < SIZES.longPrompts; i++) {
      const long = await send(url, freshIds(LONG_PROMPT_TOKENS), 1);
      longTtftMs.push(ttftOf(long));
      to = long.tokenTimes[0]!;
    }
    stop.abort();
    const outcomes = await Promise.all(streams);
    const gapsMs = gapsInWindow(
      outcomes.map((o) => o.tokenTimes),
      from,
      to,
    );
    log(
      `  budget ${budget}: ${gapsMs.length} gaps, long prompt TTFT ${longTtftMs.map((x) => x.toFixed(0)).join(', ')} ms`,
    );
    return { budget, gapsMs, longTtftMs, longPromptTokens: LONG_PROMPT_TOKENS };
  });
}

async function stall() {
  log(
    `stall: 2 streams decoding while ${SIZES.longPrompts} x ${LONG_PROMPT_TOKENS}-token prompts arrive, budgets ${STALL_BUDGETS.join(', ')}`,
  );
  const runs: StallRun[] = [];
  for (const b of STALL_BUDGETS) runs.push(await stallAt(b));
  return stallFigure(runs);
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
  policy: string,
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
    label: policy,
    replicas,
  });
  log(
    `  ${policy}: TTFT p50 ${result.ttftMs.p50.toFixed(0)} p99 ${result.ttftMs.p99.toFixed(0)} ms, hit rate ${result.hitRate?.toFixed(3)}, ${result.completed} done, ${result.errors} errors, ${result.wallS.toFixed(0)} s`,
  );
  return result;
}

async function routing(dir: string) {
  const trace = writeTrace(dir, SIZES.routingRequests);
  log(
    `routing: ${SIZES.routingRequests} requests (${TRACE.roots} customers) through the gateway over 2 engines`,
  );
  const figures = [];
  for (const policy of ['delay-cost', 'random']) {
    const r = await withStack(2, policy, ENGINE, (url) => liveRun(url, trace, 1, policy, 2));
    figures.push(runFigures(r));
  }
  return routingFigure(figures[0]!, figures[1]!);
}

async function kvroute(args: string[]): Promise<string> {
  const { stdout } = await execFileAsync(process.execPath, [BIN, ...args], { maxBuffer: 64 << 20 });
  return stdout;
}

async function fidelity(dir: string) {
  const trace = writeTrace(dir, SIZES.fidelityRequests);
  const rateScale = 0.5;
  const profile = join(dir, 'profile.yaml');
  const engine = { ...ENGINE, kvBlocks: 1024 };
  log(
    `fidelity: calibrate (${SIZES.calibrateS} s), then ${SIZES.fidelityRequests} requests live and simulated on 1 engine`,
  );
  const live = await withStack(1, 'none', engine, async (url) => {
    const calibrateArgs = [
      'calibrate',
      '--url',
      url,
      '--step-table',
      '--budget',
      String(engine.budget),
      '--catalog-model',
      'llama-3.1-8b',
      ...CATALOG,
      '--weights-dtype',
      'bf16',
      '--budget-s',
      String(SIZES.calibrateS),
      '--max-prompt-tokens',
      '2048',
      '--max-batch',
      String(engine.maxSeqs),
      '--repeats',
      '3',
      '--out',
      profile,
      '--quiet',
    ];
    log(`  kvroute ${calibrateArgs.join(' ').replace(url, 'URL')}`);
    log(
      (await kvroute(calibrateArgs))
        .split('\n')
        .map((l) => `    ${l}`)
        .join('\n'),
    );
    return liveRun(url, trace, rateScale, 'live', 1);
  });
  const simArgs = [
    'sim',
    '--trace',
    trace,
    '--rate-scale',
    String(rateScale),
    '--replicas',
    '1',
    '--policy',
    'delay-cost',
    '--model',
    'llama-3.1-8b',
    ...CATALOG,
    '--budget',
    String(engine.budget),
    '--max-seqs',
    String(engine.maxSeqs),
    '--kv-blocks',
    String(engine.kvBlocks),
    '--block-size',
    String(BLOCK_SIZE),
    '--warmup',
    '0',
    '--profile',
    profile,
    ...SIM_VIEW,
    '--json',
  ];
  log(`  kvroute ${simArgs.join(' ')}`);
  const sim = JSON.parse(await kvroute(simArgs)).results[0];
  const requestOverheadMs = readProfile(profile).curves[0]!.table?.requestOverheadMs ?? 0;
  return fidelityFigure(
    { ttftP50Ms: live.ttftMs.p50, ttftP99Ms: live.ttftMs.p99 },
    { ttftP50Ms: sim.ttftMs.p50, ttftP99Ms: sim.ttftMs.p99 },
    requestOverheadMs,
  );
}

process.once('SIGINT', () => {
  void killAll().then(() => process.exit(130));
});

const dir = mkdtempSync(join(tmpdir(), 'kvroute-bench-real-'));
const startedAt = performance.now();
try {
  if (RUNTIME === 'llama.cpp') {
    model = await tinyModelPath();
    log(`model: ${model}`);
  }
  const warm = await warmCold();
  const stallFig = await stall();
  const routingFig = await routing(dir);
  const fidelityFig = await fidelity(dir);
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
    stall: stallFig,
    routing: routingFig,
    fidelity: fidelityFig,
    wallS: Math.round((performance.now() - startedAt) / 1000),
  };
  process.stdout.write(JSON_OUT ? `${JSON.stringify(out)}\n` : `${JSON.stringify(out, null, 2)}\n`);
} finally {
  await killAll();
  rmSync(dir, { recursive: true, force: true });
}
