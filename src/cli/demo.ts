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
 */
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
 * Real engines on a 2-core machine: two of them, the groups workload (2,176-token prompts
 * sharing 2,048 tokens per group) at a light rate, a short run, and a context that also holds the
 * seed workload's 8,000-token prompts when asked for (the tiny model was trained on none anyway).
 */
const REAL_DEFAULTS = {
  replicas: 2,
  workload: 'groups',
  rate: 0.5,
  durationS: 60,
  maxModelLen: 10_240,
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
${ENGINE_HELP}${RUNTIME_HELP}  With --runtime llama.cpp: --replicas defaults to ${REAL_DEFAULTS.replicas}, --workload to ${REAL_DEFAULTS.workload}, --max-seqs to ${LLAMA_CPP_DEFAULT_MAX_SEQS},
  --rate to ${REAL_DEFAULTS.rate}, --duration to ${REAL_DEFAULTS.durationS}, the engines' context to ${REAL_DEFAULTS.maxModelLen}, and --speedup must be 1; the simulated side still
  models the catalog replica (pass --profile from kvroute calibrate --url to model the CPU)
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
  const durationS = w.durationS ?? (real ? REAL_DEFAULTS.durationS : DEFAULTS.durationS);
  const policies = readPolicyList(flags, DEFAULTS.policies);
  const engine = readEngineFlags(flags);
  if (real && !flags.has('max-seqs')) engine.maxSeqs = LLAMA_CPP_DEFAULT_MAX_SEQS;
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
  progress.phase('demo', { total: policies.length * 2, unit: 'runs' });
  try {
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
      mode: flags.bool('inprocess') ? 'inprocess' : 'process',
      signal: interrupt.signal,
      log: (line) => {
        progress.done(); // a bar on a TTY is cleared, then redrawn under the line
        process.stderr.write(`${line}\n`);
      },
      task: (label) => progress.task(label),
    });
    progress.done();
    if (flags.bool('json')) {
      process.stdout.write(`${resultsJson(rows.map((r) => r.live))}\n`);
    } else {
      process.stdout.write(
        `live (kvroute bench through kvroute serve):\n${formatLiveResults(rows.map((r) => r.live))}\n\n`,
      );
      process.stdout.write(`live versus kvroute sim:\n${formatCompare(rows)}\n`);
    }
    return interrupt.signal.aborted ? 130 : 0;
  } finally {
    process.off('SIGINT', onSigint);
    await killAll();
  }
}

// Run directly (`node --import tsx src/cli/demo.ts`), not through `kvroute`.
if (import.meta.url === `file://${process.argv[1]}`) {
  process.exitCode = await run(process.argv.slice(2)).catch((err: unknown) => {
    process.stderr.write(`demo: ${(err as Error).message}\n`);
    return 2;
  });
}
