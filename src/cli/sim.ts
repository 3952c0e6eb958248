/**
 * `kvroute sim`: the fleet simulator. Runs one or more routing policies side by side on the
 * same arrivals (same seed), optionally searches the fewest replicas that meet the SLO, and
 * prints a table, JSON, or a self-contained HTML report.
 */
import { writeFileSync } from 'node:fs';
import { GPUS, MODELS } from '../model/catalog.ts';
import { replicaSpecProblem } from '../model/cost.ts';
import { makeReplicaSpec } from '../model/spec.ts';
import { DEFAULT_POLICY, POLICY_NAMES } from '../router/registry.ts';
import { renderReport } from '../sim/report.ts';
import {
  DEFAULT_ENGINE,
  DEFAULT_SLO,
  type SimConfig,
  simulate,
  type WorkloadSpec,
} from '../sim/run.ts';
import { searchMinReplicas } from '../sim/search.ts';
import { formatResults, formatSearch } from '../sim/table.ts';
import type { FaultSpec, PolicyResult, SearchResult } from '../sim/types.ts';
import { WORKLOAD_NAMES, type WorkloadName } from '../sim/workloads.ts';
import { Flags, parseFlags, UsageError } from './args.ts';

const FLAGS = {
  workload: { type: 'string' },
  trace: { type: 'string' },
  policy: { type: 'string' },
  replicas: { type: 'string' },
  duration: { type: 'string' },
  warmup: { type: 'string' },
  seed: { type: 'string' },
  rate: { type: 'string' },
  'rate-scale': { type: 'string' },
  model: { type: 'string' },
  gpu: { type: 'string' },
  tp: { type: 'string' },
  budget: { type: 'string' },
  'max-seqs': { type: 'string' },
  'kv-policy': { type: 'string' },
  'block-size': { type: 'string' },
  'stale-ms': { type: 'string' },
  'report-ms': { type: 'string' },
  'event-delay-ms': { type: 'string' },
  index: { type: 'string' },
  'queue-source': { type: 'string' },
  'kv-threshold': { type: 'string' },
  'overlay-ttl-ms': { type: 'string' },
  kill: { type: 'string', multiple: true },
  revive: { type: 'string', multiple: true },
  'slo-ttft-p99-ms': { type: 'string' },
  'slo-tpot-p99-ms': { type: 'string' },
  search: { type: 'boolean' },
  'max-replicas': { type: 'string' },
  json: { type: 'boolean' },
  report: { type: 'string' },
  quiet: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** Replicas per workload when --replicas is not given (the seed's sizing with affinity). */
const DEFAULT_REPLICAS: Record<WorkloadName | 'trace', number> = {
  seed: 22,
  hot: 22,
  'low-shared': 40,
  groups: 8,
  multiturn: 8,
  trace: 8,
};

const HELP = `usage: kvroute sim [flags]

Discrete-event fleet simulator: engine cores timed by the cost model, the router seeing engine
state through report and KV-event delays, on a virtual clock. Several policies run side by
side on the same arrivals.

workload
  --workload NAME       ${WORKLOAD_NAMES.join(', ')} (default seed)
                        seed: 40 req/s Poisson, 200 customers x 6,000-token prefix + 2,000
                        own tokens, 300 out; hot: one customer at 10 %; low-shared: 15 % shared;
                        groups: 64 x 16 prompts, 2,048 system + 128 question, 256 out;
                        multiturn: every turn extends the conversation so far
  --trace FILE          Mooncake JSONL trace instead (timestamp, input_length, output_length,
                        hash_ids of 512-token blocks)
  --rate R              requests/s of a synthetic workload   --rate-scale X  trace speed-up
  --duration S          simulated seconds of arrivals (default 600; trace: whole trace)
  --warmup S            arrivals before this are not measured (default min(60, duration/10))
  --seed N              workload and router seed (default 1)
fleet
  --policy LIST         comma-separated, or all: ${POLICY_NAMES.join(', ')} (default ${DEFAULT_POLICY})
  --replicas N          default: seed/hot 22, low-shared 40, groups/multiturn/trace 8
  --model NAME          ${Object.keys(MODELS).join(', ')} (default ${DEFAULT_ENGINE.model})
  --gpu NAME            ${Object.keys(GPUS).join(', ')} (default ${DEFAULT_ENGINE.gpu})
  --tp N                (default ${DEFAULT_ENGINE.tp})   --budget TOKENS (default ${DEFAULT_ENGINE.budgetTokens})
  --max-seqs N          (default ${DEFAULT_ENGINE.maxSeqs})   --kv-policy paged|reserve (default ${DEFAULT_ENGINE.kvPolicy})
  --block-size N        tokens per KV block (default ${DEFAULT_ENGINE.blockSize})
router view
  --stale-ms MS         engine reports reach the router this late (default 0: also after
                        every step); the cost policy's queue term still comes from the ledger
  --report-ms MS        every replica reports this often (default 100)
  --event-delay-ms MS   KV events reach the router's index this late (default 0)
  --index events|approx            prefix index feed (default events)
  --queue-source ledger|reports    cost policy's queue term (default ledger)
  --kv-threshold F      exclude replicas above this KV usage (default 0.95)
  --overlay-ttl-ms MS   predict-on-route lifetime (router default)
faults
  --kill R@S            replica R dies at S seconds (repeatable): requests without a token
                        are re-routed, streaming ones count as errors
  --revive R@S          replica R comes back, cold, at S seconds (repeatable); a killed
                        replica without --revive stays down
SLO and search
  --slo-ttft-p99-ms MS  (default ${DEFAULT_SLO.ttftP99Ms}: a cold 8,000-token prefill, 143 ms warm +
                        the 428 ms a hit saves: the cost rule's own promise)
  --slo-tpot-p99-ms MS  (default ${DEFAULT_SLO.tpotP99Ms}: three 33.5 ms decode steps at batch 64)
  --search              fewest replicas meeting the SLO, per policy, by bisection
  --max-replicas N      search limit (default 256)
output
  --json                {"results": [...], "search": [...]}
  --report FILE.html    self-contained HTML report with SVG charts
  --quiet               no progress bar
`;

interface Parsed {
  base: SimConfig;
  policies: string[];
  search: boolean;
  maxReplicas: number;
  json: boolean;
  reportPath: string | undefined;
  quiet: boolean;
}

function parseFault(kind: 'kill' | 'revive', raw: string, replicas: number): FaultSpec {
  const m = /^(\d+)@(\d+(?:\.\d+)?)$/.exec(raw.trim());
  if (!m) throw new UsageError(`--${kind} takes REPLICA@SECONDS (e.g. 3@120), got '${raw}'`);
  const replica = Number(m[1]);
  if (replica >= replicas) {
    throw new UsageError(`--${kind} replica must be below --replicas ${replicas}, got ${replica}`);
  }
  return { kind, replica, atMs: Number(m[2]) * 1000 };
}

function parsePolicies(raw: string | undefined): string[] {
  if (raw === undefined) return [DEFAULT_POLICY];
  if (raw.trim() === 'all') return [...POLICY_NAMES];
  const names = raw.split(',').map((s) => s.trim());
  for (const name of names) {
    if (!(POLICY_NAMES as readonly string[]).includes(name)) {
      throw new UsageError(
        `--policy must be a list of ${POLICY_NAMES.join(', ')} or all; got '${name}'`,
      );
    }
  }
  return [...new Set(names)];
}

export function parseSimFlags(argv: string[]): Parsed | 'help' {
  const flags = new Flags(parseFlags(argv, FLAGS));
  if (flags.bool('help')) return 'help';
  const tracePath = flags.string('trace');
  if (tracePath !== undefined && flags.has('workload')) {
    throw new UsageError('--trace and --workload are exclusive; give one');
  }
  const workloadName = flags.oneOf('workload', WORKLOAD_NAMES) ?? 'seed';
  if (tracePath === undefined && flags.has('rate-scale')) {
    throw new UsageError('--rate-scale applies to --trace; use --rate for a synthetic workload');
  }
  if (tracePath !== undefined && flags.has('rate')) {
    throw new UsageError('--rate applies to synthetic workloads; use --rate-scale with --trace');
  }
  const ratePerS = flags.positive('rate');
  const workload: WorkloadSpec =
    tracePath !== undefined
      ? { kind: 'trace', path: tracePath, rateScale: flags.positive('rate-scale') ?? 1 }
      : { kind: 'synthetic', name: workloadName, ...(ratePerS !== undefined && { ratePerS }) };
  const replicas =
    flags.positive('replicas', true) ??
    DEFAULT_REPLICAS[tracePath !== undefined ? 'trace' : workloadName];
  const durationS = flags.positive('duration') ?? (tracePath !== undefined ? undefined : 600);
  const warmupS = flags.number('warmup', { min: 0 }) ?? Math.min(60, (durationS ?? 600) / 10);
  const engine = {
    model: flags.oneOf('model', Object.keys(MODELS)) ?? DEFAULT_ENGINE.model,
    gpu: flags.oneOf('gpu', Object.keys(GPUS)) ?? DEFAULT_ENGINE.gpu,
    tp: flags.positive('tp', true) ?? DEFAULT_ENGINE.tp,
    budgetTokens: flags.positive('budget', true) ?? DEFAULT_ENGINE.budgetTokens,
    maxSeqs: flags.positive('max-seqs', true) ?? DEFAULT_ENGINE.maxSeqs,
    kvPolicy: flags.oneOf('kv-policy', ['paged', 'reserve'] as const) ?? DEFAULT_ENGINE.kvPolicy,
    blockSize: flags.positive('block-size', true) ?? DEFAULT_ENGINE.blockSize,
  };
  const problem = replicaSpecProblem(
    makeReplicaSpec({ model: engine.model, gpu: engine.gpu, tp: engine.tp }),
  );
  if (problem) throw new UsageError(problem);
  const staleMs = flags.number('stale-ms', { min: 0 }) ?? 0;
  const faults = [
    ...flags.strings('kill').map((k) => parseFault('kill', k, replicas)),
    ...flags.strings('revive').map((k) => parseFault('revive', k, replicas)),
  ];
  const kvThreshold = flags.fraction('kv-threshold');
  const overlayTtlMs = flags.number('overlay-ttl-ms', { min: 0 });
  const base: SimConfig = {
    workload,
    seed: flags.number('seed', { min: 0, integer: true }) ?? 1,
    durationMs: durationS === undefined ? undefined : durationS * 1000,
    warmupMs: warmupS * 1000,
    replicas,
    engine,
    router: {
      policy: DEFAULT_POLICY,
      index: flags.oneOf('index', ['events', 'approx'] as const) ?? 'events',
      queueSource: flags.oneOf('queue-source', ['ledger', 'reports'] as const) ?? 'ledger',
      ...(kvThreshold !== undefined && { kvThreshold }),
      ...(overlayTtlMs !== undefined && { overlayTtlMs }),
    },
    view: {
      staleMs,
      reportMs: flags.positive('report-ms') ?? 100,
      eventDelayMs: flags.number('event-delay-ms', { min: 0 }) ?? 0,
    },
    faults,
    slo: {
      ttftP99Ms: flags.positive('slo-ttft-p99-ms') ?? DEFAULT_SLO.ttftP99Ms,
      tpotP99Ms: flags.positive('slo-tpot-p99-ms') ?? DEFAULT_SLO.tpotP99Ms,
    },
  };
  return {
    base,
    policies: parsePolicies(flags.string('policy')),
    search: flags.bool('search'),
    maxReplicas: flags.positive('max-replicas', true) ?? 256,
    json: flags.bool('json'),
    reportPath: flags.string('report'),
    quiet: flags.bool('quiet'),
  };
}

/** A one-line progress bar on a TTY stderr, shown once a run has taken more than a second. */
class Progress {
  readonly #enabled: boolean;
  readonly #startMs = performance.now();
  #shown = false;
  #label = '';

  constructor(enabled: boolean) {
    this.#enabled = enabled && process.stderr.isTTY === true;
  }

  label(text: string): void {
    this.#label = text;
  }

  update(fraction: number): void {
    if (!this.#enabled || performance.now() - this.#startMs < 1000) return;
    const width = 30;
    const filled = Math.round(fraction * width);
    const bar = `${'#'.repeat(filled)}${'.'.repeat(width - filled)}`;
    process.stderr.write(
      `\r[${bar}] ${(fraction * 100).toFixed(0).padStart(3)}% ${this.#label}\x1b[K`,
    );
    this.#shown = true;
  }

  done(): void {
    if (this.#shown) process.stderr.write('\r\x1b[K');
    this.#shown = false;
  }
}

export async function run(argv: string[]): Promise<number> {
  const parsed = parseSimFlags(argv);
  if (parsed === 'help') {
    process.stdout.write(HELP);
    return 0;
  }
  const progress = new Progress(!parsed.quiet);
  const onProgress = (f: number) => progress.update(f);
  const results: PolicyResult[] = [];
  for (const policy of parsed.policies) {
    progress.label(`${policy} x ${parsed.base.replicas}`);
    const config = { ...parsed.base, router: { ...parsed.base.router, policy }, onProgress };
    results.push(simulate(config));
  }
  const search: SearchResult[] = [];
  if (parsed.search) {
    for (const policy of parsed.policies) {
      search.push(
        searchMinReplicas(policy, {
          start: parsed.base.replicas,
          max: parsed.maxReplicas,
          probe: (replicas) => {
            progress.label(`search ${policy} x ${replicas}`);
            return simulate({
              ...parsed.base,
              replicas,
              faults: parsed.base.faults.filter((f) => f.replica < replicas),
              router: { ...parsed.base.router, policy },
              earlyStop: true,
              onProgress,
            });
          },
        }),
      );
    }
  }
  progress.done();
  if (parsed.reportPath !== undefined) {
    writeFileSync(
      parsed.reportPath,
      renderReport(results, search, {
        title: `kvroute sim: ${results[0]?.workload ?? ''}`,
        command: `kvroute sim ${argv.join(' ')}`,
      }),
    );
  }
  if (parsed.json) {
    const slim = results.map(({ load: _load, ttftCdf: _cdf, ...rest }) => rest);
    process.stdout.write(`${JSON.stringify({ results: slim, search }, jsonNumbers)}\n`);
  } else {
    process.stdout.write(`${formatResults(results)}\n`);
    if (search.length > 0) process.stdout.write(`\n${formatSearch(search)}\n`);
    if (parsed.reportPath !== undefined) process.stdout.write(`\nreport: ${parsed.reportPath}\n`);
  }
  return 0;
}

/** Rounds floats for JSON (µs resolution is plenty) and writes non-finite numbers as null. */
function jsonNumbers(_key: string, value: unknown): unknown {
  if (typeof value !== 'number') return value;
  if (!Number.isFinite(value)) return null;
  return Number.isInteger(value) ? value : Math.round(value * 1000) / 1000;
}
