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
import type { SimulatedRun } from '../results/result.ts';
import { printHelp, readFlags, UsageError } from './args.ts';
import { readEngineFlags } from './engineFlags.ts';
import { readFaults, traceEndMs } from './faultFlags.ts';
import { readPolicyList } from './policyList.ts';
import { Progress } from './progress.ts';
import { RequestsFile } from './requestsOut.ts';
import { readRouterSetups, type RouterSetup } from './routerSetups.ts';
import { readSimFaults, runAuditComparison } from './simAudit.ts';
import { readWorkloadFlags } from './workloadFlags.ts';
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
import { fleetLabel, groupReplicas } from '../sim/replicaGroups.ts';
import { formatFlow } from '../results/flowTable.ts';
import { readTenantFlags } from './simTenantFlags.ts';
import { readSimLoadFlags } from './simLoadFlags.ts';
import { shapeDurationMs } from '../workload/shape.ts';
import { formatHarness, formatStages } from '../results/harnessTable.ts';
import { readSimPlannerFlags } from './simPlannerFlags.ts';
import type { PlannerLoopOptions } from '../sim/plannerLoop.ts';
import { runSimPlanner } from './simPlanner.ts';
import { readerOf } from './options/read.ts';
import { DEFAULT_SIM_REPORT_MS, SIM_ROUTER_VIEW_OPTIONS } from './simRouterViewFlags.ts';
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
  const planner = readSimPlannerFlags(flags);
  const load = readSimLoadFlags(flags);
  const read = readWorkloadFlags(flags);
  // A ladder lasts its stages; a burst, until its requests end; both default to no warm-up.
  const w =
    load.shape === undefined
      ? read
      : {
          ...read,
          workload: { ...read.workload, shape: load.shape },
          durationS:
            load.shape.kind === 'ladder'
              ? shapeDurationMs(load.shape) / 1000
              : load.shape.kind === 'gamma'
                ? (read.durationS ?? DEFAULT_SIM_DURATION_S)
                : undefined,
          // A rate with burstiness runs as --rate does, warm-up included.
          warmupS: read.warmupS ?? (load.shape.kind === 'gamma' ? undefined : 0),
        };
  const isTrace = w.workload.kind === 'trace';
  const engine = applySimSetup(flags, readEngineFlags(flags));
  const fleetSpec = flags.string('fleet');
  const fleet = fleetSpec === undefined ? undefined : parseFleetFlag(fleetSpec, engine.model);
  if (fleet) {
    for (const other of ['replicas', 'gpu', 'tp', 'profile', 'search', 'pd']) {
      if (flags.has(other)) {
        throw new UsageError(`--fleet sets each replica's hardware and the count; drop --${other}`);
      }
    }
  }
  const replicas = fleet
    ? groupReplicas(fleet)
    : (flags.positive('replicas', true) ??
      DEFAULT_SIM_REPLICAS[w.workload.kind === 'trace' ? 'trace' : w.workload.name]);
  const durationS =
    w.durationS ?? (isTrace || load.shape !== undefined ? undefined : DEFAULT_SIM_DURATION_S);
  const warmupS = w.warmupS ?? Math.min(60, (durationS ?? DEFAULT_SIM_DURATION_S) / 10);
  const view = readerOf(SIM_ROUTER_VIEW_OPTIONS, flags);
  const slo = readerOf(SIM_SLO_OPTIONS, flags);
  const staleMs = view('stale-ms') ?? 0;
  const faults = readFaults(flags.strings('kill'), flags.strings('revive'), {
    replicas,
    end: () => {
      const from = w.durationS === undefined ? 'the default --duration' : '--duration';
      const duration = { ms: (durationS ?? Number.POSITIVE_INFINITY) * 1000, from };
      if (!isTrace) return duration;
      const last = traceEndMs(w.workload, w.seed, engine.blockSize);
      return last < duration.ms ? { ms: last, from: "the trace's last arrival" } : duration;
    },
  });
  const concurrency = flags.positive('concurrency', true);
  if (concurrency !== undefined) {
    for (const other of ['search', 'pd', 'rate']) {
      if (flags.has(other)) {
        throw new UsageError(
          `--concurrency runs a closed loop (arrivals follow completions); drop --${other}`,
        );
      }
    }
  }
  const kvThreshold = view('kv-threshold');
  const overlayTtlMs = view('overlay-ttl-ms');
  const approxForget = view('approx-forget');
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
    router: {
      policy: DEFAULT_POLICY,
      index: view('index') ?? INDEX_MODES[0],
      queueSource: view('queue-source') ?? QUEUE_SOURCES[0],
      ...(kvThreshold !== undefined && { kvThreshold }),
      ...(overlayTtlMs !== undefined && { overlayTtlMs }),
      ...(approxForget !== undefined && { approxForget }),
    },
    view: {
      staleMs,
      reportMs: view('report-ms') ?? DEFAULT_SIM_REPORT_MS,
      eventDelayMs: view('event-delay-ms') ?? 0,
    },
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
  return {
    base,
    policies: readPolicyList(flags, [DEFAULT_POLICY]),
    loraBlind: view('lora-blind') === true,
    search: slo('search') === true,
    maxReplicas: slo('max-replicas') ?? DEFAULT_SEARCH_MAX_REPLICAS,
    json: flags.bool('json'),
    reportPath: flags.string('report'),
    requestsOut: flags.string('requests-out'),
    quiet: flags.bool('quiet'),
    admission: readAdmission(flags),
    threads: slo('threads') ?? availableParallelism(),
    setups: readRouterSetups(flags),
    auditFaults: readSimFaults(flags, replicas),
    pd: readPdFlags(flags, flags.bool('search')),
    planner,
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
  if (published !== null) {
    const harnessRun = PUBLISHED_HARNESS_RUNS[published.name];
    if (harnessRun !== undefined) {
      const result = replayHarness(harnessRun, publishedSetup);
      const text = published.json ? harnessReplayJson(result) : formatHarnessReplay(result);
      process.stdout.write(`${text}\n`);
      return 0;
    }
    const setup = parseSimFlags([...PUBLISHED_RUNS[published.name]!.simArgs]);
    if (setup === 'help') return printHelp(HELP);
    const result = replayPublished(published.name, setup.base);
    process.stdout.write(`${published.json ? replayJson(result) : formatReplay(result)}\n`);
    return 0;
  }
  const parsed = parseSimFlags(argv);
  if (parsed === 'help') return printHelp(HELP);
  if (parsed.auditFaults !== null) {
    const base = { ...parsed.base, router: { ...parsed.base.router, policy: parsed.policies[0]! } };
    process.stdout.write(`${runAuditComparison(base, parsed.auditFaults, parsed.json)}
`);
    return 0;
  }
  if (parsed.pd !== null) return runSimPd(parsed.base, parsed.pd, parsed.json, parsed.maxReplicas);
  if (parsed.planner !== null) {
    return runSimPlanner(parsed.base, parsed.policies, parsed.planner, parsed.json);
  }
  const progress = new Progress({ command: 'kvroute sim', quiet: parsed.quiet });
  const setups = parsed.setups?.map((s) => ({ routers: s.routers, syncMs: s.syncMs })) ?? [{}];
  const runs = parsed.policies
    .flatMap((policy) =>
      parsed.loraBlind && (LORA_AWARE_POLICIES as readonly string[]).includes(policy)
        ? [{ policy }, { policy, loraBlind: true }]
        : [{ policy }],
    )
    .flatMap((run) => setups.map((setup) => ({ ...run, ...setup })));
  const label = (r: { policy: string; loraBlind?: boolean; routers?: number }) =>
    `${r.loraBlind ? `${r.policy}/lora-blind` : r.policy}${(r.routers ?? 1) > 1 ? ` x${r.routers} routers` : ''}`;
  // With bounds, each policy runs twice on the same arrivals: without them, then with them.
  const bound = parsed.admission;
  const bounds: (SimAdmission | undefined)[] =
    bound === undefined
      ? [undefined]
      : [{ maxQueueMs: null, ...(bound.maxTtftMs !== undefined && { maxTtftMs: null }) }, bound];
  const requests = parsed.requestsOut === undefined ? null : new RequestsFile(parsed.requestsOut);
  const fixed = runs.flatMap((run) =>
    bounds.map((admission) => ({
      admission,
      label: `${label(run)} x ${parsed.base.fleet ? fleetLabel(parsed.base.fleet) : parsed.base.replicas}`,
      config: {
        ...parsed.base,
        router: { ...parsed.base.router, ...run },
        ...(admission !== undefined && { admission }),
      } satisfies SimConfig,
    })),
  );
  const { results, search } = await runBatch({
    runs: fixed.map((f) => f.config),
    runLabels: fixed.map((f) => f.label),
    searches: parsed.search
      ? runs.map((run) => ({
          label: label(run),
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
  if (parsed.json) {
    process.stdout.write(`${resultsJson(results, search)}\n`);
  } else {
    const table = parsed.admission === undefined ? formatResults : formatAdmission;
    process.stdout.write(`${table(results)}\n`);
    if (results.some((r) => r.closedLoop)) process.stdout.write(`\n${closedLoopTable(results)}\n`);
    const flows = results.flatMap((r) => (r.flow ? [{ label: r.policy, flow: r.flow }] : []));
    if (flows.length > 0) process.stdout.write(`\n${formatFlow(flows)}\n`);
    if (results.some((r) => r.stages)) process.stdout.write(`\n${formatStages(results)}\n`);
    if (results.some((r) => r.harness)) process.stdout.write(`\n${formatHarness(results)}\n`);
    if (search.length > 0) process.stdout.write(`\n${formatSearch(search)}\n`);
    if (parsed.reportPath !== undefined) process.stdout.write(`\nreport: ${parsed.reportPath}\n`);
    if (requests) process.stdout.write(`requests: ${parsed.requestsOut}\n`);
  }
  return 0;
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
