/**
 * `npm run demo`: the live stack against the simulator. For each policy it starts N
 * `kvroute engine` processes and a `kvroute serve` gateway in front of them, replays the same
 * workload arrivals through `kvroute bench`'s client, runs `kvroute sim` on the same workload,
 * engines, replicas and policy, and prints both side by side. Engines run at --speedup, so the
 * run takes duration / speedup of wall time per policy; live latencies are scaled back to
 * workload ms. Every process it started is killed at the end, and on Ctrl-C.
 *
 *   npm run demo -- [--workload seed] [--rate 4] [--replicas 4] [--duration 120]
 *                   [--speedup 1] [--policy cost,random,round-robin] [--inprocess] [--json]
 */
import { ENGINE_DEFAULTS } from '../engine/options.ts';
import { compareLiveSim, formatCompare } from '../loadgen/compare.ts';
import { killAll } from '../loadgen/stack.ts';
import { resultsJson } from '../results/result.ts';
import { formatLiveResults } from '../results/table.ts';
import type { WorkloadSpec } from '../workload/spec.ts';
import { POLICY_NAMES } from '../router/registry.ts';
import { WORKLOAD_NAMES } from '../workload/workloads.ts';
import { Flags, parseFlags, UsageError } from './args.ts';

const FLAGS = {
  workload: { type: 'string' },
  trace: { type: 'string' },
  rate: { type: 'string' },
  'rate-scale': { type: 'string' },
  replicas: { type: 'string' },
  duration: { type: 'string' },
  warmup: { type: 'string' },
  seed: { type: 'string' },
  speedup: { type: 'string' },
  policy: { type: 'string' },
  budget: { type: 'string' },
  'max-seqs': { type: 'string' },
  'kv-policy': { type: 'string' },
  inprocess: { type: 'boolean' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/**
 * Defaults sized for a small machine: the router seed's workload at an eighth of its rate on
 * 4 replicas (cost policy: warm owners; random and round-robin: the pool churns), 2 minutes
 * of workload time per policy at speedup 1.
 */
const DEFAULTS = { workload: 'seed', rate: 5, replicas: 4, durationS: 120, speedup: 1 } as const;

export async function run(argv: string[]): Promise<number> {
  const flags = new Flags(parseFlags(argv, FLAGS));
  if (flags.bool('help')) {
    process.stdout.write(`${readHeader()}\n`);
    return 0;
  }
  const tracePath = flags.string('trace');
  const ratePerS = flags.positive('rate');
  const workload: WorkloadSpec =
    tracePath !== undefined
      ? { kind: 'trace', path: tracePath, rateScale: flags.positive('rate-scale') ?? 1 }
      : {
          kind: 'synthetic',
          name: flags.oneOf('workload', WORKLOAD_NAMES) ?? DEFAULTS.workload,
          ratePerS: ratePerS ?? DEFAULTS.rate,
        };
  const durationS = flags.positive('duration') ?? DEFAULTS.durationS;
  const policies = (flags.string('policy') ?? 'cost,random,round-robin').split(',');
  for (const p of policies) {
    if (!(POLICY_NAMES as readonly string[]).includes(p)) {
      throw new UsageError(`--policy must list ${POLICY_NAMES.join(', ')}; got '${p}'`);
    }
  }
  const interrupt = new AbortController();
  const onSigint = () => {
    process.stderr.write('\ninterrupted: stopping the live stack\n');
    interrupt.abort();
    void killAll();
  };
  process.on('SIGINT', onSigint);
  try {
    const rows = await compareLiveSim({
      workload,
      seed: flags.number('seed', { min: 0, integer: true }) ?? 1,
      durationS,
      warmupS: flags.number('warmup', { min: 0 }) ?? Math.min(60, durationS / 10),
      replicas: flags.positive('replicas', true) ?? DEFAULTS.replicas,
      policies,
      speedup: flags.positive('speedup') ?? DEFAULTS.speedup,
      engine: {
        ...ENGINE_DEFAULTS,
        budgetTokens: flags.positive('budget', true) ?? ENGINE_DEFAULTS.budgetTokens,
        maxSeqs: flags.positive('max-seqs', true) ?? ENGINE_DEFAULTS.maxSeqs,
        kvPolicy:
          flags.oneOf('kv-policy', ['paged', 'reserve'] as const) ?? ENGINE_DEFAULTS.kvPolicy,
      },
      mode: flags.bool('inprocess') ? 'inprocess' : 'process',
      signal: interrupt.signal,
      log: (line) => process.stderr.write(`${line}\n`),
    });
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

function readHeader(): string {
  return 'usage: npm run demo -- [--workload seed|hot|low-shared|groups|multiturn | --trace FILE]\n  [--rate R] [--replicas N] [--duration S] [--warmup S] [--seed N] [--speedup X]\n  [--policy cost,random,round-robin] [--budget N] [--max-seqs N] [--kv-policy paged|reserve]\n  [--inprocess] [--json]';
}

// Run directly (`node --import tsx src/cli/demo.ts`), not through `kvroute`.
if (import.meta.url === `file://${process.argv[1]}`) {
  process.exitCode = await run(process.argv.slice(2)).catch((err: unknown) => {
    process.stderr.write(`demo: ${(err as Error).message}\n`);
    return 2;
  });
}
