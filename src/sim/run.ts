/**
 * One simulation: a workload, a fleet of engine cores and one routing policy, on a virtual
 * clock. `simulate` builds the pieces from plain options, runs the fleet and summarizes it.
 */
import { EngineCore } from '../engine/core.ts';
import { makeIdlePrefill } from '../engine/idlePrefill.ts';
import { DEFAULT_MAX_LORAS } from '../engine/lora.ts';
import { type EngineOptions, makeEngineConfig } from '../engine/options.ts';
import type { EngineConfig } from '../engine/types.ts';
import type { SimulatedRun } from '../results/result.ts';
import type { RequestRecord } from '../results/requestRecord.ts';
import { type SloTargets, ttftLimitMs } from '../results/slo.ts';
import { buildWorkload, type WorkloadSpec } from '../workload/spec.ts';
import type { Arrival } from '../workload/workloads.ts';
import type { Workload } from '../workload/types.ts';
import { prefillUsPerToken } from '../model/cost.ts';
import { queueGate, type SimAdmission, summarizeAdmission, ttftGate } from './admission.ts';
import {
  Fleet,
  type FleetOptions,
  type FleetOutcome,
  type FleetRequestRecord,
  type FleetScaling,
  type SimEngine,
  type SimRouter,
} from './fleet.ts';
import { type ReplicaGroup, replicaEngineOptions } from './replicaGroups.ts';
import { makeSimRouter } from './routerAdapter.ts';
import { summarizeClosedLoop } from './closedLoop.ts';
import {
  DEFAULT_FLOW_CLASS,
  SimFlow,
  type SimFlowControl,
  type TenantSpec,
} from './flowControl.ts';
import {
  type Harness,
  type HarnessRecord,
  harnessSummary,
  stageSummaries,
} from '../results/harnessMetrics.ts';
import { type ArrivalShape, stageWindows } from '../workload/shape.ts';
import { summarizeRun } from './summary.ts';
import type { FaultSpec, RouterOptions, ViewOptions } from './types.ts';

export interface SimConfig {
  workload: WorkloadSpec;
  seed: number;
  /**
   * Arrivals stop here; in-flight requests then drain. Undefined: the whole trace, or
   * SYNTHETIC_DURATION_MS of a synthetic workload.
   */
  durationMs: number | undefined;
  warmupMs: number;
  replicas: number;
  engine: EngineOptions;
  /**
   * A mixed fleet: groups of replicas of their own GPU and TP (replicaGroups.ts), `replicas`
   * being their sum; absent: every replica runs `engine`'s hardware.
   */
  fleet?: ReplicaGroup[];
  router: RouterOptions;
  view: ViewOptions;
  faults: FaultSpec[];
  slo: SloTargets;
  /**
   * Closed loop: this many requests in flight, each end starting the workload's next prompt
   * (its arrival times ignored); the result gains `closedLoop` (`closedLoop.ts`).
   */
  concurrency?: number;
  /**
   * Open loop with the client's in-flight cap (vLLM's `bench serve --max-concurrency`): an
   * arrival waits while this many are in flight (`FleetOptions.maxConcurrency`).
   */
  maxConcurrency?: number;
  /** The client gives a request up this long after sending it; its engine aborts it. */
  clientTimeoutMs?: number;
  /**
   * With a rate ladder: each stage starts this long after every request before has ended, as
   * inference-perf runs its stages (`stageGate.ts`); absent, the stages run back to back.
   */
  stageDrainGapMs?: number;
  /** The result gains `harness`: the run by this benchmark harness's definitions. */
  metricsAs?: Harness;
  /** Stop a run as soon as it cannot meet the SLO (replica-count search). */
  earlyStop?: boolean;
  onProgress?: (fraction: number) => void;
  /**
   * The fleet-wide queue bound at arrival and the TTFT bound after routing, and goodput in the
   * result (`admission.ts`).
   */
  admission?: SimAdmission;
  /**
   * `--tenants`: each arrival's tenant, drawn by share; the result gains `flow` (per tenant:
   * served, 429, 503, TTFT and queue wait). Absent with flow control on: one tenant.
   */
  tenants?: TenantSpec[];
  /** `--flow-control on`: arrivals wait while every replica is saturated (`flowControl.ts`). */
  flowControl?: SimFlowControl;
  /** Every request's outcome as it ends, warm-up included (`--requests-out`). */
  onRequest?: (r: RequestRecord) => void;
  /** Wraps the engines and the router (the benchmark times them this way). */
  instrument?: {
    engine?: (e: SimEngine, replica: number) => SimEngine;
    router?: (r: SimRouter) => SimRouter;
  };
}

/** A synthetic workload's duration when none is given (the CLI's default, 600 s). */
const SYNTHETIC_DURATION_MS = 600_000;

/** Arrivals in [0, duration) and of those, the measured ones (after warm-up). */
export function countArrivals(
  workload: Workload,
  warmupMs: number,
): { arrivals: number; measured: number; measuredTpot: number; lastMs: number } {
  let arrivals = 0;
  let measured = 0;
  let measuredTpot = 0;
  let lastMs = 0;
  const it = workload.arrivals();
  for (let a = it.next(); !a.done; a = it.next()) {
    arrivals++;
    lastMs = a.value.atMs;
    if (a.value.atMs >= warmupMs) {
      measured++;
      if (a.value.outputTokens > 1) measuredTpot++;
    }
  }
  return { arrivals, measured, measuredTpot, lastMs };
}

/** The run's workload: its arrivals in [0, duration), its prompts and keys. */
export function makeWorkload(config: SimConfig): Workload {
  const durationMs =
    config.durationMs ?? (config.workload.kind === 'synthetic' ? SYNTHETIC_DURATION_MS : undefined);
  return buildWorkload(config.workload, {
    seed: config.seed,
    blockSize: config.engine.blockSize,
    // A closed loop takes prompts as fast as the fleet ends them: more than the open loop's.
    durationMs:
      config.concurrency !== undefined && durationMs !== undefined
        ? durationMs * CLOSED_LOOP_PROMPT_FACTOR
        : durationMs,
  });
}

/** A closed loop's synthetic prompts: this many times the open loop's, in the same order. */
const CLOSED_LOOP_PROMPT_FACTOR = 10;

/** What a caller in this thread may add to a run (`kvroute sim --planner`, plannerLoop.ts). */
export interface SimHooks {
  /** The fleet resized mid-run as a planner says. */
  scaling?: FleetScaling;
  /** The fleet's own outcome, before it is summarized. */
  onOutcome?: (outcome: FleetOutcome) => void;
}

export function simulate(
  config: SimConfig,
  makeRouter: (c: SimConfig) => SimRouter = makeSimRouter,
  hooks: SimHooks = {},
): SimulatedRun {
  const workload = makeWorkload(config);
  // A workload of adapters runs on engines with LoRA on (vLLM's limits unless given).
  if (workload.adapters && config.engine.lora === undefined) {
    config = { ...config, engine: { ...config.engine, lora: { maxLoras: DEFAULT_MAX_LORAS } } };
  }
  const plan = planRun(config, workload);
  const flow = makeFlow(config);
  const sink = makeRecordSink(config, plan.policy);
  const fleet = new Fleet(fleetOptions(config, plan, makeRouter(config), { flow, sink, hooks }));
  const outcome = fleet.run();
  hooks.onOutcome?.(outcome);
  return summarize(config, plan, outcome, { flow, sink });
}

/** What a run's pieces share, worked out once from its options. */
interface RunPlan {
  workload: Workload;
  /** The engines' configuration, and each replica's own in a mixed fleet. */
  engineConfig: EngineConfig;
  replicaConfigs: EngineConfig[] | undefined;
  /** The workload's arrivals counted, where the run needs its end or its measured count. */
  counts: ReturnType<typeof countArrivals> | undefined;
  durationMs: number;
  sampleMs: number;
  /** A prompt's TTFT on an idle replica, and the SLO's TTFT limit for it. */
  idleTtftMs: (promptTokens: number) => number;
  limitMs: (promptTokens: number) => number;
  prefillUsPerToken: number;
  policy: string;
}

function planRun(config: SimConfig, workload: Workload): RunPlan {
  // Engines stepped in turn: each one's requests are out of cache by its next step.
  const engineConfig = { ...makeEngineConfig(config.engine), prefetchRunning: true };
  const counts =
    config.earlyStop || config.durationMs === undefined
      ? countArrivals(workload, config.warmupMs)
      : undefined;
  const durationMs = config.durationMs ?? Math.ceil(counts!.lastMs + 1);
  const idleTtftMs = makeIdlePrefill(engineConfig);
  return {
    workload,
    engineConfig,
    replicaConfigs: config.fleet
      ? replicaEngineOptions(config.engine, config.fleet).map((o) => ({
          ...makeEngineConfig(o),
          prefetchRunning: true,
        }))
      : undefined,
    counts,
    durationMs,
    sampleMs: Math.max(250, Math.round(durationMs / 400)),
    idleTtftMs,
    limitMs: (promptTokens) => ttftLimitMs(config.slo, idleTtftMs(promptTokens)),
    prefillUsPerToken: prefillUsPerToken(engineConfig.spec, config.engine.budgetTokens),
    policy: runLabel(config.router),
  };
}

/** `--tenants` or `--flow-control`: the run's flow control (one tenant when none is given). */
function makeFlow(config: SimConfig): SimFlow<Arrival> | undefined {
  if (config.tenants === undefined && config.flowControl === undefined) return undefined;
  return new SimFlow<Arrival>(
    config.tenants ?? [{ name: 'default', share: 1, weight: 1, priorityClass: DEFAULT_FLOW_CLASS }],
    config.seed,
    config.flowControl,
  );
}

/** Where every request's record goes: `--requests-out`, and the harness's and stages' list. */
interface RecordSink {
  /** Kept for per-stage figures and a harness's own ones; null when neither is asked. */
  records: HarnessRecord[] | null;
  ladder: Extract<ArrivalShape, { kind: 'ladder' }> | undefined;
  onRequest: ((r: FleetRequestRecord) => void) | undefined;
}

function makeRecordSink(config: SimConfig, policy: string): RecordSink {
  const ladder = config.workload.shape?.kind === 'ladder' ? config.workload.shape : undefined;
  const records: HarnessRecord[] | null =
    ladder !== undefined || config.metricsAs !== undefined ? [] : null;
  const labelledOut = config.onRequest && labelled(config.onRequest, policy, config.replicas);
  const onRequest =
    records === null
      ? labelledOut
      : (r: FleetRequestRecord) => {
          records.push({
            arrivalMs: r.arrivalMs,
            endMs: r.endMs,
            ttftMs: r.ttftMs,
            tpotMs: r.tpotMs,
            promptTokens: r.promptTokens,
            ...(r.error !== undefined && { error: r.error }),
            ...(r.scheduledMs !== undefined && { scheduledMs: r.scheduledMs }),
          });
          labelledOut?.(r);
        };
  return { records, ladder, onRequest };
}

/** The fleet's options: the run's plan, its router, and what the caller adds. */
function fleetOptions(
  config: SimConfig,
  plan: RunPlan,
  router: SimRouter,
  more: { flow: SimFlow<Arrival> | undefined; sink: RecordSink; hooks: SimHooks },
): FleetOptions {
  const { engineConfig, replicaConfigs, counts, durationMs } = plan;
  const { flow, hooks } = more;
  const onRequest = more.sink.onRequest;
  const wrapEngine = config.instrument?.engine ?? ((e: SimEngine, _replica: number) => e);
  const wrapRouter = config.instrument?.router ?? ((r: SimRouter) => r);
  const admit = config.admission && queueGate(config.admission, plan.prefillUsPerToken);
  const admitRoute = config.admission && ttftGate(config.admission, plan.prefillUsPerToken);
  return {
    replicas: config.replicas,
    workload: plan.workload,
    router: wrapRouter(router),
    makeEngine: (replica) =>
      wrapEngine(new EngineCore(replicaConfigs?.[replica] ?? engineConfig), replica),
    view: config.view,
    faults: config.faults,
    durationMs,
    warmupMs: config.warmupMs,
    ...(config.earlyStop &&
      counts && {
        earlyStop: {
          ttftLimitMs: plan.limitMs,
          tpotLimitMs: config.slo.tpotP99Ms,
          expectedMeasured: counts.measured,
          expectedMeasuredTpot: counts.measuredTpot,
        },
      }),
    sampleMs: plan.sampleMs,
    loadBucketMs: Math.max(1000, Math.round(durationMs / 120 / 1000) * 1000),
    ...(config.onProgress && { onProgress: config.onProgress }),
    ...(config.concurrency !== undefined && { concurrency: config.concurrency }),
    ...(admit && { admit }),
    ...(admitRoute && { admitRoute }),
    ...(flow && { flow, prefillUsPerToken: plan.prefillUsPerToken }),
    ...(onRequest && { onRequest }),
    ...(config.maxConcurrency !== undefined && { maxConcurrency: config.maxConcurrency }),
    ...(config.clientTimeoutMs !== undefined && { clientTimeoutMs: config.clientTimeoutMs }),
    ...(config.stageDrainGapMs !== undefined &&
      more.sink.ladder !== undefined && {
        stageDrain: {
          windows: stageWindows(more.sink.ladder.stages),
          gapMs: config.stageDrainGapMs,
        },
      }),
    ...requestOverheads(config.replicas, plan),
    ...(hooks.scaling && { scaling: hooks.scaling }),
  };
}

/** Each replica's calibrated per-request overheads, where any replica has one. */
function requestOverheads(
  replicas: number,
  plan: RunPlan,
): Pick<FleetOptions, 'requestOverheadMs' | 'requestOverheadMsPerPromptToken'> {
  const calibrationOf = (r: number) =>
    (plan.replicaConfigs?.[r] ?? plan.engineConfig).spec.calibration;
  const overheads = Array.from(
    { length: replicas },
    (_, r) => calibrationOf(r)?.requestOverheadMs ?? 0,
  );
  const perToken = Array.from(
    { length: replicas },
    (_, r) => calibrationOf(r)?.requestMsPerPromptToken ?? 0,
  );
  return {
    ...(overheads.some((ms) => ms > 0) && { requestOverheadMs: overheads }),
    ...(perToken.some((ms) => ms > 0) && { requestOverheadMsPerPromptToken: perToken }),
  };
}

/** The fleet's outcome as the run's result, with the parts its options asked for. */
function summarize(
  config: SimConfig,
  plan: RunPlan,
  outcome: FleetOutcome,
  more: { flow: SimFlow<Arrival> | undefined; sink: RecordSink },
): SimulatedRun {
  const { durationMs, limitMs } = plan;
  const run = summarizeRun(
    {
      policy: plan.policy,
      replicas: config.replicas,
      workload: plan.workload.name,
      durationMs,
      warmupMs: config.warmupMs,
      slo: config.slo,
      sampleMs: plan.sampleMs,
      idleTtftMs: plan.idleTtftMs,
    },
    outcome,
  );
  if (config.router.routers !== undefined) {
    run.gateways = { routers: config.router.routers, syncMs: config.router.syncMs ?? null };
  }
  if (more.flow !== undefined) run.flow = more.flow.result();
  addRecordFigures(run, config, outcome, more.sink);
  const limits = {
    durationMs,
    warmupMs: config.warmupMs,
    ttftLimitMs: limitMs,
    tpotLimitMs: config.slo.tpotP99Ms,
  };
  if (config.concurrency !== undefined) {
    run.closedLoop = summarizeClosedLoop(config.concurrency, outcome.log, limits);
  }
  if (config.admission === undefined) return run;
  return { ...run, admission: summarizeAdmission(config.admission, outcome, limits) };
}

/** Per-stage figures of a ladder and a harness's own ones, from every request's record. */
function addRecordFigures(
  run: SimulatedRun,
  config: SimConfig,
  { endMs: runEndMs, stageWindows: windowsAsRun }: Pick<FleetOutcome, 'endMs' | 'stageWindows'>,
  { records, ladder }: RecordSink,
): void {
  if (records === null) return;
  if (ladder !== undefined) {
    const windows = windowsAsRun ?? stageWindows(ladder.stages);
    run.stages = stageSummaries(windows, records, runEndMs);
  }
  if (config.metricsAs !== undefined) {
    run.harness = harnessSummary(config.metricsAs, records, {
      startMs: config.warmupMs,
      runEndMs,
    });
  }
}

/** The fleet's request outcomes with the run's labels, as `--requests-out` writes them. */
function labelled(
  onRequest: (r: RequestRecord) => void,
  policy: string,
  replicas: number,
): (r: FleetRequestRecord) => void {
  return (r) => onRequest({ ...r, policy, replicas });
}

/** A run's label: the policy (LoRA-blind or not), then its gateways when there are several. */
function runLabel(router: RouterOptions): string {
  const policy = router.loraBlind ? `${router.policy}/lora-blind` : router.policy;
  const routers = router.routers ?? 1;
  if (routers === 1) return policy;
  const sync = router.syncMs == null ? 'no sync' : `sync ${router.syncMs} ms`;
  return `${policy}/${routers} routers, ${sync}`;
}
