/**
 * `kvroute sim`: the fleet simulator. Runs one or more routing policies side by side on the
 * same arrivals (same seed), optionally searches the fewest replicas that meet the SLO, and
 * prints a table, JSON, or a self-contained HTML report.
 */
import { writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { DEFAULT_POLICY, INDEX_MODES, QUEUE_SOURCES } from '../router/defaults.ts';
import { LORA_AWARE_POLICIES } from '../router/registry.ts';
import { renderReport } from '../results/report.ts';
import { resultsJson } from '../results/result.ts';
import { formatAdmission } from '../results/admissionTable.ts';
import { formatResults, formatSearch } from '../results/table.ts';
import type { RequestRecord } from '../results/requestRecord.ts';
import { runBatch } from '../sim/parallel.ts';
import type { SimAdmission } from '../sim/admission.ts';
import type { SimConfig } from '../sim/run.ts';
import type { SearchResult, SimulatedRun } from '../results/result.ts';
import { type Flags, printHelp, readFlags, UsageError } from './args.ts';
import { readEngineFlags } from './engineFlags.ts';
import { readFaults, traceEndMs } from './faultFlags.ts';
import { readPolicyList } from './policyList.ts';
import { Progress } from './progress.ts';
import { RequestsFile } from './requestsOut.ts';
import { readRouterSetups, type RouterSetup } from './routerSetups.ts';
import { readSimFaults, runAuditComparison } from './simAudit.ts';
import { readWorkloadFlags, type WorkloadFlags, withArrivalShape } from './workloadFlags.ts';
import type { SimFaults } from '../sim/audit.ts';
import { type PdFlags, readPdFlags, runSimPd } from './simPd.ts';
import { parseFleetFlag } from './fleetFlag.ts';
import { PUBLISHED_HARNESS_RUNS, PUBLISHED_NAMES, PUBLISHED_RUNS } from '../sim/published/index.ts';
import {
  formatHarnessReplay,
  harnessReplayJson,
  replayHarness,
} from '../sim/published/harnessReplay.ts';
import { formatReplay, replayJson, replayPublished } from './replayPublished.ts';
import { applySimSetup } from './simSetupFlags.ts';
import { fleetLabel, groupReplicas, type ReplicaGroup } from '../sim/replicaGroups.ts';
import { formatFlow } from '../results/flowTable.ts';
import { readTenantFlags } from './simTenantFlags.ts';
import { readSimLoadFlags } from './simLoadFlags.ts';
import type { ArrivalShape } from '../workload/shape.ts';
import { formatHarness, formatStages } from '../results/harnessTable.ts';
import { readSimPlannerFlags } from './simPlannerFlags.ts';
import type { PlannerLoopOptions } from '../sim/plannerLoop.ts';
import { runSimPlanner } from './simPlanner.ts';
import { readerOf } from './options/read.ts';
import { DEFAULT_SIM_REPORT_MS, SIM_ROUTER_VIEW_OPTIONS } from './simRouterViewFlags.ts';
import {
  checkPrefixCacheScorerMode,
  checkScorerWeightsPolicies,
  LLMD_SCORER_OPTIONS,
  readPrefixCacheScorerFlag,
  scorerWeightsFlagOptions,
} from './llmdScorerFlags.ts';
import {
  DEFAULT_SEARCH_MAX_REPLICAS,
  readAdmission,
  readSlo,
  SIM_SLO_OPTIONS,
} from './simSloFlags.ts';
import { helpOf } from './options/help.ts';
import { DEFAULT_SIM_DURATION_S, DEFAULT_SIM_REPLICAS, SIM_OPTIONS } from './options/sim.ts';
import { specOf } from './options/spec.ts';

const HELP = `usage: kvroute sim [flags]

Discrete-event fleet simulator: engine cores timed by the cost model, the router seeing engine
state through report and KV-event delays, on a virtual clock. Several policies run side by
side on the same arrivals.

${helpOf(SIM_OPTIONS)}`;

interface Parsed {
  base: SimConfig;
  policies: string[];
  /** Each LoRA-aware policy again, LoRA-blind. */
  loraBlind: boolean;
  search: boolean;
  maxReplicas: number;
  json: boolean;
  reportPath: string | undefined;
  /** --requests-out: a JSONL file of every run's requests. */
  requestsOut: string | undefined;
  quiet: boolean;
  /** --max-queue-ms / --max-ttft-ms: each policy runs without, then with, these bounds. */
  admission: SimAdmission | undefined;
  /** Worker threads for runs and search probes (1: all in this thread). */
  threads: number;
  /** --routers / --sync-ms: each policy runs once per setup; null: one router, as always. */
  setups: RouterSetup[] | null;
  /** --fault-drop-events / --fault-silent-reset-s: the audit's three runs instead. */
  auditFaults: SimFaults | null;
  /** --pd P:D or auto (simPd.ts); null: an aggregated fleet. */
  pd: PdFlags | null;
  /** --planner: the online planner in the loop (simPlanner.ts); null: a fixed fleet. */
  planner: PlannerLoopOptions | null;
}

/** `--replay-published NAME`: the run's own flags; only --json and --quiet may go with it. */
function parsePublished(argv: string[]): { name: string; json: boolean } | null {
  const at = argv.indexOf('--replay-published');
  if (at === -1) return null;
  const name = argv[at + 1];
  if (name === undefined || !PUBLISHED_NAMES.includes(name)) {
    throw new UsageError(
      `--replay-published must be one of ${PUBLISHED_NAMES.join(', ')}; got '${name ?? ''}'`,
    );
  }
  const rest = argv.filter((_, i) => i !== at && i !== at + 1);
  const extra = rest.find((a) => a !== '--json' && a !== '--quiet');
  if (extra !== undefined) {
    throw new UsageError(`--replay-published sets up the run itself; drop ${extra}`);
  }
  return { name, json: rest.includes('--json') };
}

export function parseSimFlags(argv: string[]): Parsed | 'help' {
  const flags = readFlags(argv, specOf(SIM_OPTIONS));
  if (flags === 'help') return 'help';
  const option = readerOf(SIM_OPTIONS, flags);
  const planner = readSimPlannerFlags(flags);
  const load = readSimLoadFlags(flags);
  const w = readShapedWorkload(flags, load.shape);
  const engine = applySimSetup(flags, readEngineFlags(flags));
  const fleet = readFleet(flags, engine.model);
  const replicas = fleet
    ? groupReplicas(fleet)
    : (option('replicas') ??
      DEFAULT_SIM_REPLICAS[w.workload.kind === 'trace' ? 'trace' : w.workload.name]);
  const isTrace = w.workload.kind === 'trace';
  const durationS =
    w.durationS ?? (isTrace || load.shape !== undefined ? undefined : DEFAULT_SIM_DURATION_S);
  const warmupS = w.warmupS ?? Math.min(60, (durationS ?? DEFAULT_SIM_DURATION_S) / 10);
  const faults = readRunFaults(flags, w, replicas, durationS, engine.blockSize);
  const concurrency = readConcurrency(flags);
  const base: SimConfig = {
    workload: w.workload,
    seed: w.seed,
    durationMs: durationS === undefined ? undefined : durationS * 1000,
    warmupMs: warmupS * 1000,
    replicas,
    engine,
    ...(fleet && { fleet }),
    ...(concurrency !== undefined && { concurrency }),
    ...(load.maxConcurrency !== undefined && { maxConcurrency: load.maxConcurrency }),
    ...(load.clientTimeoutMs !== undefined && { clientTimeoutMs: load.clientTimeoutMs }),
    ...(load.metricsAs !== undefined && { metricsAs: load.metricsAs }),
    ...(load.stageDrainGapMs !== undefined && { stageDrainGapMs: load.stageDrainGapMs }),
    ...readRouterView(flags),
    faults,
    slo: readSlo(flags),
    ...readTenantFlags(flags, [
      'pd',
      'fault-replicas',
      'fault-drop-events',
      'fault-lie',
      'fault-silent-reset-s',
    ]),
  };
  const slo = readerOf(SIM_SLO_OPTIONS, flags);
  return {
    base,
    policies: readSimPolicies(flags),
    loraBlind: readerOf(SIM_ROUTER_VIEW_OPTIONS, flags)('lora-blind') === true,
    search: slo('search') === true,
    maxReplicas: slo('max-replicas') ?? DEFAULT_SEARCH_MAX_REPLICAS,
    json: option('json') === true,
    reportPath: option('report'),
    requestsOut: option('requests-out'),
    quiet: option('quiet') === true,
    admission: readAdmission(flags),
    threads: slo('threads') ?? availableParallelism(),
    setups: readRouterSetups(flags),
    auditFaults: readSimFaults(flags, replicas),
    pd: readPdFlags(flags, flags.bool('search')),
    planner,
  };
}

/** The workload flags with the client's arrival shape (`withArrivalShape`). */
function readShapedWorkload(flags: Flags, shape: ArrivalShape | undefined): WorkloadFlags {
  return withArrivalShape(readWorkloadFlags(flags), shape, DEFAULT_SIM_DURATION_S);
}

/** `--fleet`: a mixed fleet, which sets each replica's hardware and the count itself. */
function readFleet(flags: Flags, model: string): ReplicaGroup[] | undefined {
  const spec = readerOf(SIM_OPTIONS, flags)('fleet');
  if (spec === undefined) return undefined;
  const fleet = parseFleetFlag(spec, model);
  for (const other of ['replicas', 'gpu', 'tp', 'profile', 'search', 'pd']) {
    if (flags.has(other)) {
      throw new UsageError(`--fleet sets each replica's hardware and the count; drop --${other}`);
    }
  }
  return fleet;
}

/** `--kill` / `--revive`, each within the arrivals (a trace's, or --duration's). */
function readRunFaults(
  flags: Flags,
  w: WorkloadFlags,
  replicas: number,
  durationS: number | undefined,
  blockSize: number,
): SimConfig['faults'] {
  const option = readerOf(SIM_OPTIONS, flags);
  return readFaults(option('kill') ?? [], option('revive') ?? [], {
    replicas,
    end: () => {
      const from = w.durationS === undefined ? 'the default --duration' : '--duration';
      const duration = { ms: (durationS ?? Number.POSITIVE_INFINITY) * 1000, from };
      if (w.workload.kind !== 'trace') return duration;
      const last = traceEndMs(w.workload, w.seed, blockSize);
      return last < duration.ms ? { ms: last, from: "the trace's last arrival" } : duration;
    },
  });
}

/** `--concurrency C`: a closed loop, arrivals following completions. */
function readConcurrency(flags: Flags): number | undefined {
  const concurrency = readerOf(SIM_OPTIONS, flags)('concurrency');
  if (concurrency === undefined) return undefined;
  for (const other of ['search', 'pd', 'rate']) {
    if (flags.has(other)) {
      throw new UsageError(
        `--concurrency runs a closed loop (arrivals follow completions); drop --${other}`,
      );
    }
  }
  return concurrency;
}

/** `--policy`'s list; `--scorer-weights` with an explicit list must weigh one of it. */
function readSimPolicies(flags: Flags): string[] {
  const policies = readPolicyList(flags, [DEFAULT_POLICY]);
  if (flags.has('scorer-weights') && flags.has('policy')) checkScorerWeightsPolicies(policies);
  return policies;
}

/** The router's settings and how late it sees the engines (the router-view rows). */
function readRouterView(flags: Flags): Pick<SimConfig, 'router' | 'view'> {
  const view = readerOf(SIM_ROUTER_VIEW_OPTIONS, flags);
  const kvThreshold = view('kv-threshold');
  const overlayTtlMs = view('overlay-ttl-ms');
  const approxForget = view('approx-forget');
  const llmd = readerOf(LLMD_SCORER_OPTIONS, flags);
  const weights = llmd('scorer-weights');
  const prefixScorer = llmd('prefix-cache-scorer');
  if (prefixScorer !== undefined) checkPrefixCacheScorerMode(approxForget);
  return {
    router: {
      policy: DEFAULT_POLICY,
      index: view('index') ?? INDEX_MODES[0],
      queueSource: view('queue-source') ?? QUEUE_SOURCES[0],
      ...(kvThreshold !== undefined && { kvThreshold }),
      ...(overlayTtlMs !== undefined && { overlayTtlMs }),
      ...(approxForget !== undefined && { approxForget }),
      ...(weights !== undefined && { policyOptions: scorerWeightsFlagOptions(weights) }),
      ...(prefixScorer !== undefined && { llmdPrefix: readPrefixCacheScorerFlag(prefixScorer) }),
    },
    view: {
      staleMs: view('stale-ms') ?? 0,
      reportMs: view('report-ms') ?? DEFAULT_SIM_REPORT_MS,
      eventDelayMs: view('event-delay-ms') ?? 0,
    },
  };
}

/** A published run's setup from its own flags (they are the project's: no help, no error). */
export function publishedSetup(args: readonly string[]): SimConfig {
  const parsed = parseSimFlags([...args]);
  if (parsed === 'help') throw new UsageError('a published setup cannot ask for --help');
  return parsed.base;
}

export async function run(argv: string[]): Promise<number> {
  const published = parsePublished(argv);
  if (published !== null) return runPublished(published.name, published.json);
  const parsed = parseSimFlags(argv);
  if (parsed === 'help') return printHelp(HELP);
  if (parsed.auditFaults !== null) {
    const base = { ...parsed.base, router: { ...parsed.base.router, policy: parsed.policies[0]! } };
    process.stdout.write(`${runAuditComparison(base, parsed.auditFaults, parsed.json)}\n`);
    return 0;
  }
  if (parsed.pd !== null) return runSimPd(parsed.base, parsed.pd, parsed.json, parsed.maxReplicas);
  if (parsed.planner !== null) {
    return runSimPlanner(parsed.base, parsed.policies, parsed.planner, parsed.json);
  }
  const progress = new Progress({ command: 'kvroute sim', quiet: parsed.quiet });
  const runs = policyRuns(parsed);
  const fixed = fixedRuns(parsed, runs);
  const requests = parsed.requestsOut === undefined ? null : new RequestsFile(parsed.requestsOut);
  const { results, search } = await runBatch({
    runs: fixed.map((f) => f.config),
    runLabels: fixed.map((f) => f.label),
    searches: parsed.search
      ? runs.map((run) => ({
          label: runLabel(run),
          config: { ...parsed.base, router: { ...parsed.base.router, ...run } },
        }))
      : [],
    bounds: { start: parsed.base.replicas, max: parsed.maxReplicas },
    threads: parsed.threads,
    progress,
    ...(requests && {
      onRequest: (i: number, r: RequestRecord) => {
        const a = fixed[i]!.admission;
        requests.add(i, a === undefined ? r : { ...r, ...a });
      },
    }),
  });
  progress.done();
  requests?.close();
  if (parsed.reportPath !== undefined) {
    writeFileSync(
      parsed.reportPath,
      renderReport(results, search, {
        title: `kvroute sim: ${results[0]?.workload ?? ''}`,
        command: `kvroute sim ${argv.join(' ')}`,
      }),
    );
  }
  process.stdout.write(
    parsed.json ? `${resultsJson(results, search)}\n` : resultsText(parsed, results, search),
  );
  return 0;
}

/** `--replay-published NAME`: the published setup simulated beside its published figures. */
function runPublished(name: string, json: boolean): number {
  const harnessRun = PUBLISHED_HARNESS_RUNS[name];
  if (harnessRun !== undefined) {
    const result = replayHarness(harnessRun, publishedSetup);
    process.stdout.write(`${json ? harnessReplayJson(result) : formatHarnessReplay(result)}\n`);
    return 0;
  }
  const setup = parseSimFlags([...PUBLISHED_RUNS[name]!.simArgs]);
  if (setup === 'help') return printHelp(HELP);
  const result = replayPublished(name, setup.base);
  process.stdout.write(`${json ? replayJson(result) : formatReplay(result)}\n`);
  return 0;
}

/** One run of the fleet: a policy, LoRA-blind or not, under one gateway setup. */
interface PolicyRun {
  policy: string;
  loraBlind?: boolean;
  routers?: number;
  syncMs?: number | null;
}

/** Each policy (and its LoRA-blind twin) under each gateway setup. */
function policyRuns(parsed: Parsed): PolicyRun[] {
  const setups = parsed.setups?.map((s) => ({ routers: s.routers, syncMs: s.syncMs })) ?? [{}];
  return parsed.policies
    .flatMap((policy): PolicyRun[] =>
      parsed.loraBlind && (LORA_AWARE_POLICIES as readonly string[]).includes(policy)
        ? [{ policy }, { policy, loraBlind: true }]
        : [{ policy }],
    )
    .flatMap((run) => setups.map((setup) => ({ ...run, ...setup })));
}

function runLabel(r: PolicyRun): string {
  const policy = r.loraBlind ? `${r.policy}/lora-blind` : r.policy;
  return `${policy}${(r.routers ?? 1) > 1 ? ` x${r.routers} routers` : ''}`;
}

/**
 * The fixed-size runs: with admission bounds, each policy runs twice on the same arrivals:
 * without them, then with them.
 */
function fixedRuns(
  parsed: Parsed,
  runs: readonly PolicyRun[],
): { admission: SimAdmission | undefined; label: string; config: SimConfig }[] {
  const bound = parsed.admission;
  const bounds: (SimAdmission | undefined)[] =
    bound === undefined
      ? [undefined]
      : [{ maxQueueMs: null, ...(bound.maxTtftMs !== undefined && { maxTtftMs: null }) }, bound];
  const size = parsed.base.fleet ? fleetLabel(parsed.base.fleet) : parsed.base.replicas;
  return runs.flatMap((run) =>
    bounds.map((admission) => ({
      admission,
      label: `${runLabel(run)} x ${size}`,
      config: {
        ...parsed.base,
        router: { ...parsed.base.router, ...run },
        ...(admission !== undefined && { admission }),
      } satisfies SimConfig,
    })),
  );
}

/** The tables printed without --json: the runs, then each part some run has. */
function resultsText(parsed: Parsed, results: SimulatedRun[], search: SearchResult[]): string {
  const table = parsed.admission === undefined ? formatResults : formatAdmission;
  let out = `${table(results)}\n`;
  if (results.some((r) => r.closedLoop)) out += `\n${closedLoopTable(results)}\n`;
  const flows = results.flatMap((r) => (r.flow ? [{ label: r.policy, flow: r.flow }] : []));
  if (flows.length > 0) out += `\n${formatFlow(flows)}\n`;
  if (results.some((r) => r.stages)) out += `\n${formatStages(results)}\n`;
  if (results.some((r) => r.harness)) out += `\n${formatHarness(results)}\n`;
  if (search.length > 0) out += `\n${formatSearch(search)}\n`;
  if (parsed.reportPath !== undefined) out += `\nreport: ${parsed.reportPath}\n`;
  if (parsed.requestsOut !== undefined) out += `requests: ${parsed.requestsOut}\n`;
  return out;
}

/** The closed loop's throughput per run: requests/s, output tokens/s, goodput. */
function closedLoopTable(results: readonly SimulatedRun[]): string {
  const rows = results.map((r) => {
    const c = r.closedLoop!;
    const f = (x: number, d: number) =>
      x.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
    return [
      r.policy,
      String(c.concurrency),
      f(c.requestsPerS, 2),
      f(c.outputTokensPerS, 0),
      f(c.goodputRps, 2),
    ];
  });
  const header = ['policy', 'concurrency', 'req/s', 'output tok/s', 'goodput/s'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [
    line(header),
    widths.map((w) => '-'.repeat(w)).join('  '),
    ...rows.map(line),
    'closed loop: over requests ending between --warmup and --duration; goodput: those meeting the TTFT and TPOT targets',
    ...results
      .filter((r) => r.closedLoop!.over === 'measured-requests')
      .map(
        (r) =>
          `${r.policy}: no request both started after --warmup and ended before --duration; figures over every measured request, from the first start to the last end`,
      ),
  ].join('\n');
}
