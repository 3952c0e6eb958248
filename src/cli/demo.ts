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
import { flagSpec, printHelp, readFlags, UsageError } from './args.ts';
import { RUNTIME_FLAG_NAMES, RUNTIME_HELP, readRuntimeFlags } from './runtimeFlags.ts';
import { ENGINE_FLAGS, ENGINE_HELP, readEngineFlags } from './engineFlags.ts';
import { POLICY_LIST_HELP, readPolicyList } from './policyList.ts';
import { Progress } from './progress.ts';
import type { WorkloadSpec } from '../workload/spec.ts';
import { readWorkloadFlags, WORKLOAD_FLAGS, workloadHelp } from './workloadFlags.ts';

const FLAGS = flagSpec({
  string: `replicas speedup policy ${RUNTIME_FLAG_NAMES}`,
  boolean: 'inprocess json quiet',
});

/**
 * Defaults sized for a small machine: the router seed's workload at an eighth of its rate on
 * 4 replicas (cost policy: warm owners; random and round-robin: the pool churns), 2 minutes
 * of workload time per policy at speedup 1.
 */
const DEFAULTS = {
  rate: 5,
  replicas: 4,
  durationS: 120,
  speedup: 1,
  policies: ['cost', 'random', 'round-robin'],
} as const;

/**
 * Real engines on a 2-core machine: two of them, the shared-prefix workload sized like
 * `npm run bench:real`'s routing trace (6 groups of a 1,024-token system prompt, 128-token
 * questions, 8 tokens out) at 1 request/s for 40 s, and a KV pool of 256 blocks per engine:
 * room for the prefixes of about 3 of the 6 groups, so a policy that spreads every group over
 * both engines (round-robin) evicts what it will need next, and one that keeps a group on one
 * engine (delay-cost) does not. The context also holds the seed workload's 8,000-token prompts
 * when asked for (the tiny model was trained on none anyway).
 */
const REAL_DEFAULTS = {
  replicas: 2,
  workload: 'shared-prefix',
  sharedPrefix: {
    numGroups: 6,
    numPromptsPerGroup: 8,
    systemPromptLen: 1024,
    questionLen: 128,
    outputLen: 8,
  },
  rate: 1,
  durationS: 40,
  kvBlocks: 256,
  maxModelLen: 10_240,
  policies: ['delay-cost', 'round-robin'],
  /** Wall seconds of `kvroute calibrate` measurements on one engine. */
  calibrateS: 30,
} as const;

const HELP = `usage: npm run demo -- [flags]

The live stack (kvroute engine processes behind kvroute serve, driven by kvroute bench's client)
against kvroute sim on the same workload, engines, replicas and policies, side by side.

workload
${workloadHelp({
  duration: `${DEFAULTS.durationS}`,
  warmup: 'min(60, duration/10)',
  rate: `${DEFAULTS.rate}`,
})}fleet
${POLICY_LIST_HELP} (default ${DEFAULTS.policies.join(',')})
  --replicas N          (default ${DEFAULTS.replicas})
  --speedup X           engines' modeled time / wall time (default ${DEFAULTS.speedup})
  --inprocess           engines and gateway in this process instead of child processes
${ENGINE_HELP}${RUNTIME_HELP}  With --runtime llama.cpp: --policy defaults to ${REAL_DEFAULTS.policies.join(',')}, --replicas to ${REAL_DEFAULTS.replicas},
  --workload to ${REAL_DEFAULTS.workload} (${REAL_DEFAULTS.sharedPrefix.numGroups} groups x ${REAL_DEFAULTS.sharedPrefix.numPromptsPerGroup}, ${REAL_DEFAULTS.sharedPrefix.systemPromptLen} system + ${REAL_DEFAULTS.sharedPrefix.questionLen} question tokens, ${REAL_DEFAULTS.sharedPrefix.outputLen} out), --rate to ${REAL_DEFAULTS.rate},
  --duration to ${REAL_DEFAULTS.durationS}, --max-seqs to ${LLAMA_CPP_DEFAULT_MAX_SEQS}, --kv-blocks to ${REAL_DEFAULTS.kvBlocks}, the engines' context to
  ${REAL_DEFAULTS.maxModelLen}, and --speedup must be 1. Without --profile, a calibration step first
  measures one engine with kvroute calibrate and its step table (${REAL_DEFAULTS.calibrateS} s of measurements): the
  simulated side models that engine's measured step times, not the catalog GPU, and the gateway's
  delay-cost is told what a decode costs there (kvroute serve's decode cost option). With
  --profile FILE that file is used instead. About 5 minutes in all on 2 busy cores.
output
  --json                the live results as kvroute bench --json writes them
  --quiet               no progress (a bar on a TTY, else a line to stderr every ~10 s)
`;

export async function run(argv: string[]): Promise<number> {
  const flags = readFlags(argv, FLAGS, WORKLOAD_FLAGS, ENGINE_FLAGS);
  if (flags === 'help') return printHelp(HELP);
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
  const speedup = flags.positive('speedup') ?? DEFAULTS.speedup;
  if (real && speedup !== 1)
    throw new UsageError('--speedup: real engines run in real time (1 only)');
  const interrupt = new AbortController();
  const onSigint = () => {
    process.stderr.write('\ninterrupted: stopping the live stack\n');
    interrupt.abort();
    void killAll();
  };
  process.on('SIGINT', onSigint);
  const progress = new Progress({ command: 'demo', quiet: flags.bool('quiet') });
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
      replicas:
        flags.positive('replicas', true) ?? (real ? REAL_DEFAULTS.replicas : DEFAULTS.replicas),
      policies,
      speedup,
      engine,
      real,
      ...(decodeCost && { decodeCost }),
      mode: flags.bool('inprocess') ? 'inprocess' : 'process',
      signal: interrupt.signal,
      log,
      task: (label) => progress.task(label),
    });
    progress.done();
    printDemo(rows, flags.bool('json'), real !== null);
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
