/**
 * `npm run demo`: the live stack against the simulator. For each policy it starts N
 * `kvroute engine` processes and a `kvroute serve` gateway in front of them, replays the same
 * workload arrivals through `kvroute bench`'s client, runs `kvroute sim` on the same workload,
 * engines, replicas and policy, and prints both side by side. Engines run at --speedup, so the
 * run takes duration / speedup of wall time per policy; live latencies are scaled back to
 * workload ms. Every process it started is killed at the end, and on Ctrl-C.
 *
 *   npm run demo -- [--workload seed] [--rate 4] [--replicas 4] [--duration 120]
 *                   [--speedup 1] [--policy cost,random,round-robin] [--inprocess] [--json] [--quiet]
 *
 * With `--runtime llama.cpp` the engines are real (llama.cpp on the CPU): a calibration step
 * first measures one of them (`kvroute calibrate --url --step-table`, src/loadgen/calibrateLive.ts)
 * so that the simulated side models that engine, not the catalog's GPU, and the gateway's
 * `delay-cost` (the gateway's default policy, docs/routing.md) is told what a decode costs there.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { calibrateLiveEngine } from '../loadgen/calibrateLive.ts';
import { compareLiveSim, formatCompare } from '../loadgen/compare.ts';
import { killAll } from '../loadgen/stack.ts';
import { resultsJson } from '../results/result.ts';
import { formatLiveResults } from '../results/table.ts';
import { LLAMA_CPP_DEFAULT_MAX_SEQS } from '../engine/runtime/llamaCpp/serve.ts';
import { printHelp, readFlags, UsageError } from './args.ts';
import { readRuntimeFlags } from './runtimeFlags.ts';
import { readEngineFlags } from './engineFlags.ts';
import { DEMO_DEFAULTS, DEMO_OPTIONS, DEMO_REAL_DEFAULTS } from './options/demo.ts';
import { helpOf } from './options/help.ts';
import { readerOf } from './options/read.ts';
import { specOf } from './options/spec.ts';
import { readPolicyList } from './policyList.ts';
import { Progress } from './progress.ts';
import type { WorkloadSpec } from '../workload/spec.ts';
import { readWorkloadFlags } from './workloadFlags.ts';

const FLAGS = specOf(DEMO_OPTIONS);
const DEFAULTS = DEMO_DEFAULTS;
const REAL_DEFAULTS = DEMO_REAL_DEFAULTS;

const HELP = `usage: npm run demo -- [flags]

The live stack (kvroute engine processes behind kvroute serve, driven by kvroute bench's client)
against kvroute sim on the same workload, engines, replicas and policies, side by side.

${helpOf(DEMO_OPTIONS)}`;

export async function run(argv: string[]): Promise<number> {
  const flags = readFlags(argv, FLAGS);
  if (flags === 'help') return printHelp(HELP);
  const option = readerOf(DEMO_OPTIONS, flags);
  const flagged = await readRuntimeFlags(flags);
  const real = flagged && { maxModelLen: REAL_DEFAULTS.maxModelLen, ...flagged };
  const w = readWorkloadFlags(
    flags,
    real
      ? { ratePerS: REAL_DEFAULTS.rate, workload: REAL_DEFAULTS.workload }
      : { ratePerS: DEFAULTS.rate },
  );
  const spec = w.workload;
  if (real && spec.kind === 'synthetic' && spec.name === 'shared-prefix' && !spec.sharedPrefix) {
    spec.sharedPrefix = { ...REAL_DEFAULTS.sharedPrefix };
  }
  const durationS = w.durationS ?? (real ? REAL_DEFAULTS.durationS : DEFAULTS.durationS);
  const policies = readPolicyList(flags, real ? REAL_DEFAULTS.policies : DEFAULTS.policies);
  const engine = readEngineFlags(flags);
  if (real && !flags.has('max-seqs')) engine.maxSeqs = LLAMA_CPP_DEFAULT_MAX_SEQS;
  if (real && !flags.has('kv-blocks')) engine.kvBlocks = REAL_DEFAULTS.kvBlocks;
  const speedup = option('speedup') ?? DEFAULTS.speedup;
  if (real && speedup !== 1)
    throw new UsageError('--speedup: real engines run in real time (1 only)');
  const interrupt = new AbortController();
  const onSigint = () => {
    process.stderr.write('\ninterrupted: stopping the live stack\n');
    interrupt.abort();
    void killAll();
  };
  process.on('SIGINT', onSigint);
  const progress = new Progress({ command: 'demo', quiet: option('quiet') === true });
  const log = (line: string) => {
    progress.done(); // a bar on a TTY is cleared, then redrawn under the line
    process.stderr.write(`${line}\n`);
  };
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-demo-'));
  try {
    const decodeCost =
      real && engine.profile === undefined
        ? await calibrateDemoEngine(engine, real, w.workload, dir, log)
        : undefined;
    if (interrupt.signal.aborted) return 130;
    progress.phase('demo', { total: policies.length * 2, unit: 'runs' });
    const rows = await compareLiveSim({
      workload: w.workload,
      seed: w.seed,
      durationS,
      warmupS: w.warmupS ?? Math.min(60, durationS / 10),
      replicas: option('replicas') ?? (real ? REAL_DEFAULTS.replicas : DEFAULTS.replicas),
      policies,
      speedup,
      engine,
      real,
      ...(decodeCost && { decodeCost }),
      mode: option('inprocess') ? 'inprocess' : 'process',
      signal: interrupt.signal,
      log,
      task: (label) => progress.task(label),
    });
    progress.done();
    printDemo(rows, option('json') === true, real !== null);
    return interrupt.signal.aborted ? 130 : 0;
  } finally {
    process.off('SIGINT', onSigint);
    await killAll();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Calibrates one real engine (`kvroute calibrate --url --step-table`): the simulated side gets its
 * step table (`engine.profile`), the gateway its decode cost.
 */
async function calibrateDemoEngine(
  engine: ReturnType<typeof readEngineFlags>,
  real: NonNullable<Awaited<ReturnType<typeof readRuntimeFlags>>> & { maxModelLen: number },
  workload: WorkloadSpec,
  dir: string,
  log: (line: string) => void,
): Promise<{ tokens: number; budgetTokens: number }> {
  log(
    `calibration: kvroute calibrate --url --step-table on one engine (${REAL_DEFAULTS.calibrateS} s of measurements)`,
  );
  const calibrated = await calibrateLiveEngine({
    engine,
    real,
    budgetS: REAL_DEFAULTS.calibrateS,
    maxPromptTokens: longestPrompt(workload, engine.budgetTokens, real.maxModelLen),
    dir,
  });
  engine.profile = calibrated.profile;
  log(
    `calibration: the simulated side models this engine's step table; a decode costs ${calibrated.decodeCostTokens.toFixed(1)} prompt tokens (the gateway's --decode-cost-tokens)`,
  );
  return { tokens: calibrated.decodeCostTokens, budgetTokens: engine.budgetTokens };
}

/** The live results, then live against the simulator (or the live results as JSON). */
function printDemo(
  rows: Awaited<ReturnType<typeof compareLiveSim>>,
  json: boolean,
  real: boolean,
): void {
  if (json) {
    process.stdout.write(`${resultsJson(rows.map((r) => r.live))}\n`);
  } else {
    process.stdout.write(
      `live (kvroute bench through kvroute serve):\n${formatLiveResults(rows.map((r) => r.live))}\n\n`,
    );
    process.stdout.write(`live versus kvroute sim:\n${formatCompare(rows)}\n`);
    if (real) process.stdout.write(`${REAL_EXPECT}\n`);
  }
}

/** What a run on real engines shows, printed under its comparison. */
const REAL_EXPECT = `what to expect with real engines: the routing gain shows in the hit rate. delay-cost keeps
each group on one engine; round-robin sends every group to both, whose pools hold the prefixes of
about 3 of the 6 groups (the simulator: about 83 % against 59 %; live within a few points). At
1 request/s the engines barely queue, so both policies' TTFT p99 is a whole prompt's cold
prefill: the simulator gives them the same TTFT p50 and p99, and the ranking's tie is then broken
by the order of --policy. The simulated step times are the calibration's: on a machine whose load
changes after it (other work on 2 cores here), live TTFTs miss the 15 % tolerance, as the
send-lag warning says, while the hit rates agree.`;

/**
 * The longest prompt the calibration probes: the shared-prefix shape's system prompt and
 * question, else calibrate's own default (4 x budget), within the engines' context.
 */
function longestPrompt(
  workload: WorkloadSpec,
  budgetTokens: number,
  maxModelLen: number | undefined,
): number {
  const shape = workload.kind === 'synthetic' ? workload.sharedPrefix : undefined;
  const tokens = shape ? shape.systemPromptLen + shape.questionLen : 4 * budgetTokens;
  return maxModelLen === undefined ? tokens : Math.min(tokens, maxModelLen);
}

// Run directly (`node --import tsx src/cli/demo.ts`), not through `kvroute`.
if (import.meta.url === `file://${process.argv[1]}`) {
  process.exitCode = await run(process.argv.slice(2)).catch((err: unknown) => {
    process.stderr.write(`demo: ${(err as Error).message}\n`);
    return 2;
  });
}
