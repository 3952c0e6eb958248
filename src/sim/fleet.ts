/**
 * The fleet on a virtual clock: N engine cores, one router, and the delays between them.
 * A replica steps as soon as it has work; `step()` runs when the step starts and its results
 * (tokens, finished requests, KV events) become visible when it ends, `durationMs` later. The
 * router learns first tokens and completions at once (the gateway sees the streams), engine
 * reports `staleMs` late and KV events `eventDelayMs` late. A killed replica's requests are
 * re-routed if they have not streamed a token and counted as errors if they have; nothing is
 * dropped without a count. A replica with a request overhead (a calibrated profile's) gets each
 * request that long after it was routed: the request is the replica's from the routing on
 * (queued, re-routed if the replica dies), its engine's only from the hand-off.
 *
 * With `scaling` (`kvroute sim --planner`, plannerLoop.ts) the fleet changes size mid-run: every
 * `intervalMs` it asks for the count wanted; a replica added joins the router `startupMs` later
 * (cold), one removed leaves the router at once (no new request) and the fleet once its last
 * request has ended. Replicas are numbered in the order they are made and a number is never
 * reused. Without `scaling` nothing here runs and the fleet is as it always was.
 */
import type {
  EngineCounters,
  EngineRequest,
  RequestFinished,
  StepResult,
  TokenEmitted,
} from '../engine/types.ts';
import type { QueueView } from '../admission/queueBound.ts';
import type { ReplicaLoad } from '../flow/saturation.ts';
import type { HeldArrival, SimFlow } from './flowControl.ts';
import type { BlockKey } from '../kv/blockKey.ts';
import type { KvEvent } from '../kv/events.ts';
import { EventQueue, PRIORITY, type SimEvent } from './eventQueue.ts';
import { runLoop, type SimClock } from './loop.ts';
import { BusyTracker, LoadSampler, RequestLog } from './metrics.ts';
import { OwnerTracker } from './owners.ts';
import { type StageDrain, StageGate } from './stageGate.ts';
import { TokenGaps } from './tokenGaps.ts';
import type { Arrival } from '../workload/workloads.ts';
import type { Workload } from '../workload/types.ts';
import type { StageWindow } from '../workload/shape.ts';
import type { RequestRecord } from '../results/requestRecord.ts';
import type { FaultSpec, ViewOptions } from './types.ts';

/** What the fleet needs of an engine core. */
export interface SimEngine {
  add(req: EngineRequest): void;
  step(): StepResult;
  hasWork(): boolean;
  counters(): EngineCounters;
  /** Drops a queued or running request and frees its KV now (a client's disconnect). */
  abort(id: string): boolean;
}

/** A fleet that changes size as a planner says (`FleetOptions.scaling`). */
export interface FleetScaling {
  /** How often `desired` is asked, simulated ms (the first time at `intervalMs`). */
  intervalMs: number;
  /** A replica asked for takes requests this long later (its start-up). */
  startupMs: number;
  /** Every arrival let in, with its prompt's block keys, as it is routed. */
  observe(arrival: Arrival, blockKeys: readonly BlockKey[]): void;
  /** The count wanted now (at least 1); null: no answer yet, the count stays. */
  desired(nowMs: number): number | null;
}

/** The fleet's size after a change: replicas taking requests, starting up, draining. */
export interface ScalingPoint {
  atMs: number;
  serving: number;
  starting: number;
  draining: number;
}

export interface ReplicaReport {
  kvUsage: number;
  running: number;
  waiting: number;
  /** Prompt tokens assigned to the replica whose first token has not come back. */
  queuedPromptTokens: number;
  reportedAtMs: number;
  /** LoRA on: adapters running and waiting and max_loras (vLLM's `vllm:lora_requests_info`). */
  loras?: { running: string[]; waiting: string[]; maxLoras: number };
}

export interface SimRouteRequest {
  id: string;
  blockKeys: readonly BlockKey[];
  promptTokens: number;
  blockSize: number;
  customer: number;
  /** The request's LoRA adapter, if any. */
  lora?: string;
  /** Replicas this decision treats as down (flow control: those without room). */
  avoidReplicas?: readonly number[];
}

/** What the fleet needs of a router (see routerAdapter.ts for the real one). */
export interface SimRouter {
  /** The chosen replica and the prompt tokens it does not cache; null when none is healthy. */
  route(req: SimRouteRequest, nowMs: number): { replicaId: number; uncachedTokens: number } | null;
  onFirstToken(id: string, nowMs: number): void;
  onFinished(id: string, nowMs: number): void;
  onReport(replica: number, report: ReplicaReport, nowMs: number): void;
  applyEvents(replica: number, events: readonly KvEvent[], nowMs: number): void;
  markDown(replica: number, nowMs: number): void;
  markUp(replica: number, nowMs: number): void;
  /**
   * A replica made mid-run joins (cold), numbered after every earlier one; required by
   * `FleetOptions.scaling`.
   */
  addReplica?(replica: number, nowMs: number): void;
  /** The replica takes no new request; its requests in flight still end (draining). */
  removeReplica?(replica: number, nowMs: number): void;
  /** Whether the router consumes KV events (the approximate index does not). */
  readonly wantsEvents: boolean;
  /** The router's own counters (decisions, spills, fail-opens...), for the results. */
  stats?(): Record<string, number>;
  /**
   * The leading blocks of `blockKeys` each replica holds in the router's view, by replica, read
   * without routing (flow control's owner release); absent where the router cannot tell.
   */
  prefixBlocks?(blockKeys: readonly BlockKey[], nowMs: number): ArrayLike<number>;
}

export interface FleetOptions {
  replicas: number;
  workload: Workload;
  router: SimRouter;
  makeEngine: (replica: number) => SimEngine;
  view: ViewOptions;
  faults: FaultSpec[];
  durationMs: number;
  /** Requests arriving before this do not count towards latency and hit rate. */
  warmupMs: number;
  /**
   * Stop as soon as the SLO cannot be met (search probes): more measured requests over their
   * TTFT limit (by prompt length: `ttftLimitMs` in `src/results/slo.ts`) or the TPOT limit than
   * a p99 over `expectedMeasured` requests allows.
   */
  earlyStop?: {
    ttftLimitMs: (promptTokens: number) => number;
    tpotLimitMs: number;
    expectedMeasured: number;
    expectedMeasuredTpot: number;
  };
  sampleMs: number;
  loadBucketMs: number;
  onProgress?: (fraction: number) => void;
  /** Admission at arrival (`admission.ts`): false refuses the request, counted as rejected. */
  admit?: (replicas: readonly QueueView[]) => boolean;
  /** After routing a new arrival: false refuses it (the TTFT bound, `admission.ts`). */
  admitRoute?: (queuedPromptTokens: number, uncachedTokens: number) => boolean;
  /**
   * Closed loop: this many requests in flight. The workload's prompts are taken in its order,
   * its arrival times ignored: `concurrency` start at 0, and each request's end (finished,
   * failed or refused) starts the next at once, until `durationMs` (or the prompts run out).
   */
  concurrency?: number;
  /** Every request's outcome as it ends, warm-up included (`--requests-out`); off when absent. */
  onRequest?: (r: FleetRequestRecord) => void;
  /**
   * The client's in-flight cap (vLLM's `bench serve --max-concurrency`, an asyncio semaphore
   * around each request in `vllm/benchmarks/serve.py` `benchmark`): an arrival finding this many
   * requests in flight waits, first come first served, and is sent when one ends; its TTFT and
   * latency count from the send, as the harness's clock starts inside the semaphore.
   */
  maxConcurrency?: number;
  /**
   * The client gives a request up this long after sending it: it is counted as `timeout`, and
   * its engine aborts it at once (a disconnect: its blocks are freed, `EngineCore.abort`).
   */
  clientTimeoutMs?: number;
  /**
   * A rate ladder run stage by stage as inference-perf runs it (`stageGate.ts`): a stage's
   * arrivals wait until every request before has ended, then start `gapMs` later.
   */
  stageDrain?: StageDrain;
  /** Per replica, ms from routing a request to its engine taking it (absent: 0 for all). */
  requestOverheadMs?: readonly number[];
  /**
   * Per replica, ms more per prompt token (a text prompt's tokenization on the server; absent:
   * 0 for all): the hand-off is `requestOverheadMs + promptTokens x this` after the routing.
   */
  requestOverheadMsPerPromptToken?: readonly number[];
  /**
   * Tenants and, when on, flow control (`flowControl.ts`): arrivals wait in its queue while
   * every replica is saturated, and are dispatched as replicas regain room.
   */
  flow?: SimFlow<Arrival>;
  /** The served model's prefill cost, pricing the ledger's queue for the saturation check. */
  prefillUsPerToken?: number;
  /** The fleet resized mid-run as a planner says; absent: `replicas` throughout. */
  scaling?: FleetScaling;
}

/** A request's outcome: `RequestRecord` without the run's labels (policy, replicas). */
export type FleetRequestRecord = Omit<
  RequestRecord,
  'policy' | 'replicas' | 'maxQueueMs' | 'maxTtftMs'
>;

interface Req {
  id: string;
  /** The arrival's index in the workload. */
  index: number;
  arrival: Arrival;
  /** Kept until the first token, for re-routing after a failure (only when one can happen). */
  tokens: Int32Array | null;
  blockKeys: readonly BlockKey[] | null;
  replica: number;
  /** Prompt tokens not cached where it was routed (its share of the replica's reported queue). */
  uncachedTokens: number;
  firstTokenMs: number;
  /** Its slot in the fleet's TokenGaps, handed to its engine with it. */
  slot: number;
  rerouted: boolean;
  measured: boolean;
  /** Its tenant (`FleetOptions.flow`; 0 without one) and how long it waited in the flow queue. */
  tenant: number;
  queueWaitMs: number;
  /** Flow control: replicas without room when it was let through, left out of its routing. */
  avoid: readonly number[] | null;
  /** On its engine (handed off): a timeout aborts it there. */
  onEngine: boolean;
  /** When the workload scheduled it, if the client's cap held it back (sent at `arrival.atMs`). */
  scheduledMs?: number;
}

/** The events that carry nothing but their time (each handled by `#onTick`). */
type Tick = 'reportTick' | 'flowDeadline' | 'send' | 'scale';

type FleetEvent = SimEvent &
  (
    | { kind: Tick }
    | { kind: 'arrival'; arrival: Arrival }
    | { kind: 'stepEnd'; replica: number; gen: number }
    | { kind: 'handOff'; replica: number; gen: number; req: Req }
    | { kind: 'kvEvents'; replica: number; gen: number; events: KvEvent[] }
    | { kind: 'report'; reports: [number, number, ReplicaReport][] }
    | { kind: 'fault'; fault: FaultSpec }
    | { kind: 'sample' }
    | { kind: 'timeout'; req: Req }
    | { kind: 'ready'; replica: number; gen: number }
  );

/**
 * A replica's place in a resized fleet: starting (made, not yet routable), serving, draining
 * (out of the router, its requests still ending), gone (left; its engine dropped).
 */
type ReplicaPhase = 'starting' | 'serving' | 'draining' | 'gone';

class Replica {
  engine: SimEngine | null;
  /** Bumped when the replica dies, so its in-flight step and events are ignored. */
  gen = 0;
  busy = false;
  stepStartMs = 0;
  pending: StepResult | null = null;
  /**
   * The slots (`EngineRequest.handle`) of the pending step's tokens, copied out when the step
   * starts, while its token objects are fresh in the cache: by the step's end hundreds of other
   * engines have stepped, and reading each token object again was a miss per token.
   */
  pendingSlots = new Int32Array(64);
  /**
   * Slots of requests that left while a step was pending: its tokens may still name them, so
   * they are freed when that step ends, not reused before.
   */
  slotsAfterStep: number[] = [];
  stepEvent: FleetEvent & { kind: 'stepEnd' };
  /** Requests on this replica, in assignment order. */
  readonly requests = new Map<string, Req>();
  queuedPromptTokens = 0;
  /** The last report the router received (the saturation check reads the router's view). */
  lastReport: ReplicaReport | null = null;
  phase: ReplicaPhase = 'serving';

  constructor(
    readonly index: number,
    engine: SimEngine,
  ) {
    this.engine = engine;
    this.stepEvent = this.makeStepEvent();
  }

  makeStepEvent(): FleetEvent & { kind: 'stepEnd' } {
    return {
      kind: 'stepEnd',
      replica: this.index,
      gen: this.gen,
      timeMs: 0,
      priority: PRIORITY.stepEnd,
      seq: 0,
    };
  }
}

export interface FleetOutcome {
  log: RequestLog;
  busy: BusyTracker;
  load: LoadSampler;
  owners: OwnerTracker;
  arrived: number;
  completed: number;
  rerouted: number;
  errorsByKind: Record<string, number>;
  endMs: number;
  engineSteps: number;
  events: number;
  stoppedEarly: boolean;
  /**
   * Per fault: customers whose prefix only the dead replica held (they lose their cache), how
   * many it held that another replica also held, and its re-routed and errored requests.
   */
  faultLog: {
    fault: FaultSpec;
    customers: number[];
    sharedCustomers: number;
    rerouted: number;
    errors: number;
  }[];
  routerStats: Record<string, number>;
  /** Arrivals refused by admission (counted in `arrived`, not in `errors`). */
  rejected: number;
  /** Of those, and of all arrivals, the ones after warm-up. */
  rejectedMeasured: number;
  arrivedMeasured: number;
  /** The most requests in flight at once (sent, not ended), waiting ones not counted. */
  peakInFlight: number;
  /** The last end (done, failed or timed out) of a measured request; NaN when none ended. */
  lastMeasuredEndMs: number;
  /** With `scaling`: the fleet's size at 0 and after every change, in time order. */
  scaling?: ScalingPoint[];
  /** With `stageDrain`: each stage's window as run. */
  stageWindows?: StageWindow[];
}

export class Fleet {
  readonly #o: FleetOptions;
  readonly #queue = new EventQueue<FleetEvent>();
  readonly #clock: SimClock = { nowMs: 0 };
  readonly #replicas: Replica[];
  readonly #requests = new Map<string, Req>();
  /** Flow control's owner release: each queued arrival's block keys, made once. */
  readonly #heldKeys = new WeakMap<HeldArrival<Arrival>, readonly BlockKey[]>();
  readonly #gaps = new TokenGaps();
  readonly #arrivals: Iterator<Arrival>;
  readonly #log = new RequestLog();
  readonly #busy: BusyTracker;
  readonly #load: LoadSampler;
  readonly #owners: OwnerTracker;
  readonly #errors: Record<string, number> = {};
  readonly #faultLog: FleetOutcome['faultLog'] = [];
  #arrivalsDone = false;
  /** With `stageDrain`: holds a stage's first arrival until the requests before have ended. */
  readonly #stageGate: StageGate | null;
  /** Arrivals held by the client's in-flight cap, in arrival order (`#waitHead` is the next). */
  readonly #waiting: Arrival[] = [];
  #waitHead = 0;
  #sending = false;
  #peakInFlight = 0;
  #lastMeasuredEndMs = Number.NaN;
  #nextId = 0;
  #arrived = 0;
  #arrivedMeasured = 0;
  #rejected = 0;
  #rejectedMeasured = 0;
  #completed = 0;
  #rerouted = 0;
  #steps = 0;
  #ttftViolations = 0;
  #tpotViolations = 0;
  #stoppedEarly = false;
  readonly #freshReports: boolean;
  /** A kill can strand a request before its first token: only then is its prompt kept. */
  readonly #keepPrompts: boolean;
  /** With `scaling`: the size after each change. */
  readonly #scalingLog: ScalingPoint[] = [];
  /** What each tick does at its time. */
  readonly #onTick: Record<Tick, (nowMs: number) => void> = {
    reportTick: (nowMs) => this.#onReportTick(nowMs),
    flowDeadline: (nowMs) => this.#expireFlow(nowMs),
    send: (nowMs) => this.#send(nowMs),
    scale: (nowMs) => this.#onScale(nowMs),
  };

  constructor(opts: FleetOptions) {
    this.#o = opts;
    this.#replicas = Array.from(
      { length: opts.replicas },
      (_, i) => new Replica(i, opts.makeEngine(i)),
    );
    this.#arrivals = opts.workload.arrivals();
    this.#stageGate = opts.stageDrain !== undefined ? new StageGate(opts.stageDrain) : null;
    this.#busy = new BusyTracker(opts.replicas);
    this.#load = new LoadSampler(opts.replicas, opts.durationMs * 3, opts.loadBucketMs);
    this.#owners = new OwnerTracker(opts.workload, opts.replicas);
    this.#freshReports = opts.view.staleMs === 0;
    this.#keepPrompts = opts.faults.some((f) => f.kind === 'kill');
    if (opts.scaling !== undefined) {
      if (opts.router.addReplica === undefined || opts.router.removeReplica === undefined) {
        throw new Error('a fleet that changes size needs a router that adds and removes replicas');
      }
      if (!(opts.scaling.intervalMs > 0) || !(opts.scaling.startupMs >= 0)) {
        throw new RangeError('scaling needs intervalMs > 0 and startupMs >= 0');
      }
    }
  }

  run(): FleetOutcome {
    const o = this.#o;
    const starts = o.concurrency ?? 1;
    for (let i = 0; i < starts; i++) {
      const first = this.#nextArrival();
      if (first) this.#queue.push(first);
    }
    this.#push({ kind: 'reportTick' }, 0, PRIORITY.reportTick);
    this.#push({ kind: 'sample' }, 0, PRIORITY.sample);
    for (const fault of o.faults) this.#push({ kind: 'fault', fault }, fault.atMs, PRIORITY.fault);
    if (o.scaling !== undefined) {
      this.#logScaling(0);
      this.#push({ kind: 'scale' }, o.scaling.intervalMs, PRIORITY.reportTick);
    }
    const horizonMs = o.durationMs;
    const events = runLoop(this.#queue, this.#clock, (e) => this.#handle(e), {
      check: (nowMs) => {
        o.onProgress?.(Math.min(1, nowMs / horizonMs));
        return this.#stoppedEarly;
      },
    });
    // Whatever is still in flight is counted (an early stop leaves requests behind by design).
    const leftKind = this.#stoppedEarly ? 'stopped' : 'unfinished';
    for (let i = 0; i < this.#requests.size; i++) this.#error(leftKind);
    for (const req of this.#requests.values()) this.#o.flow?.onFailed(req.tenant);
    for (const item of this.#o.flow?.takeLeft() ?? []) {
      this.#error(leftKind);
      this.#o.onRequest?.({
        ...refusedRecord(item.payload.index, item.payload.arrival, null),
        error: leftKind,
      });
    }
    for (let i = this.#waitHead; i < this.#waiting.length; i++) this.#error(leftKind);
    if (o.onRequest) for (const req of this.#requests.values()) this.#record(req, leftKind, null);
    return {
      log: this.#log,
      busy: this.#busy,
      load: this.#load,
      owners: this.#owners,
      arrived: this.#arrived,
      completed: this.#completed,
      rerouted: this.#rerouted,
      errorsByKind: this.#errors,
      endMs: this.#clock.nowMs,
      engineSteps: this.#steps,
      events,
      stoppedEarly: this.#stoppedEarly,
      faultLog: this.#faultLog,
      routerStats: this.#o.router.stats?.() ?? {},
      rejected: this.#rejected,
      rejectedMeasured: this.#rejectedMeasured,
      arrivedMeasured: this.#arrivedMeasured,
      peakInFlight: this.#peakInFlight,
      lastMeasuredEndMs: this.#lastMeasuredEndMs,
      ...(o.scaling !== undefined && { scaling: this.#scalingLog }),
      ...(this.#stageGate !== null && { stageWindows: this.#stageGate.windows() }),
    };
  }

  #push(
    body: FleetEvent extends infer E
      ? E extends SimEvent
        ? Omit<E, keyof SimEvent>
        : never
      : never,
    timeMs: number,
    priority: number,
  ): void {
    this.#queue.push({ ...body, timeMs, priority, seq: 0 } as FleetEvent);
  }

  /** More simulated time is needed while requests arrive or are in flight. */
  #live(): boolean {
    return (
      !this.#arrivalsDone ||
      this.#requests.size > 0 ||
      (this.#o.flow?.queued ?? 0) > 0 ||
      this.#waitHead < this.#waiting.length
    );
  }

  #handle(e: FleetEvent): FleetEvent | undefined {
    const nowMs = this.#clock.nowMs;
    switch (e.kind) {
      case 'stepEnd':
        this.#onStepEnd(e.replica, e.gen, nowMs);
        this.#drainFlow(nowMs);
        return undefined;
      case 'handOff': {
        // A replica that died since has re-routed the request already.
        const r = this.#replicas[e.replica]!;
        // A request the client gave up on meanwhile has left already.
        if (r.gen === e.gen && r.engine !== null && this.#requests.has(e.req.id))
          this.#handOff(r, e.req, nowMs);
        return undefined;
      }
      case 'arrival':
        if (this.#o.maxConcurrency !== undefined) {
          this.#waiting.push(e.arrival);
          this.#send(nowMs);
        } else {
          this.#onArrival(e.arrival, nowMs);
        }
        return this.#o.concurrency === undefined ? this.#nextArrival() : undefined;
      case 'timeout':
        this.#onTimeout(e.req, nowMs);
        return undefined;
      case 'reportTick':
      case 'flowDeadline':
      case 'send':
      case 'scale':
        this.#onTick[e.kind](nowMs);
        return undefined;
      case 'kvEvents': {
        const r = this.#replicas[e.replica]!;
        if (r.gen === e.gen && r.engine !== null && r.phase === 'serving')
          this.#o.router.applyEvents(e.replica, e.events, nowMs);
        return undefined;
      }
      case 'report':
        // A report from before a replica died is dropped (gen), even if it came back since.
        for (const [replica, gen, report] of e.reports) {
          const r = this.#replicas[replica]!;
          if (r.engine !== null && r.gen === gen && r.phase === 'serving')
            this.#toRouter(r, report, nowMs);
        }
        this.#drainFlow(nowMs);
        return undefined;
      case 'fault':
        if (e.fault.kind === 'kill') this.#kill(e.fault, nowMs);
        else this.#revive(e.fault.replica, nowMs);
        return undefined;
      case 'ready':
        this.#onReady(e.replica, e.gen, nowMs);
        return undefined;
      case 'sample':
        this.#owners.sample();
        if (this.#live()) this.#push({ kind: 'sample' }, nowMs + this.#o.sampleMs, PRIORITY.sample);
        return undefined;
    }
  }

  #nextArrival(): FleetEvent | undefined {
    const closed = this.#o.concurrency !== undefined;
    if (closed && this.#clock.nowMs >= this.#o.durationMs) this.#arrivalsDone = true;
    if (this.#arrivalsDone) return undefined;
    const next = this.#arrivals.next();
    if (next.done) {
      this.#arrivalsDone = true;
      return undefined;
    }
    // Closed loop: the prompt arrives now, when a slot of the loop came free.
    const gate = this.#stageGate;
    const arrival = closed
      ? { ...next.value, atMs: this.#clock.nowMs }
      : gate !== null
        ? gate.admit(next.value)
        : next.value;
    // Held by the stage gate until the requests before have ended (`#releaseStage`).
    if (arrival === null) return undefined;
    return {
      kind: 'arrival',
      arrival,
      timeMs: arrival.atMs,
      priority: PRIORITY.arrival,
      seq: 0,
    };
  }

  #onArrival(arrival: Arrival, nowMs: number, scheduledMs?: number): void {
    const measured = arrival.atMs >= this.#o.warmupMs;
    if (measured) this.#arrivedMeasured++;
    const flow = this.#o.flow;
    const tenant = flow?.drawTenant() ?? 0;
    flow?.countArrival(tenant);
    if (this.#o.admit !== undefined && !this.#o.admit(this.#queues())) {
      flow?.onRefused(tenant);
      this.#refuse(this.#arrived++, arrival, measured, nowMs, scheduledMs);
      return;
    }
    if (flow !== undefined) {
      const held = {
        arrival,
        index: this.#arrived++,
        tenant,
        ...(scheduledMs !== undefined && { scheduledMs }),
      };
      const verdict = flow.onArrival(
        held,
        arrival.promptLength,
        nowMs,
        () => this.#loads(),
        (h) => this.#prefixBlocks(h, nowMs),
      );
      if (verdict === 'dispatch') this.#start(held, 0, nowMs);
      else if (verdict === 'refused') this.#refuse(held.index, arrival, measured, nowMs);
      else {
        const deadlineMs = flow.deadlineMs(nowMs)!;
        this.#push({ kind: 'flowDeadline' }, deadlineMs, PRIORITY.arrival);
      }
      return;
    }
    this.#start(
      {
        arrival,
        index: this.#arrived++,
        tenant,
        ...(scheduledMs !== undefined && { scheduledMs }),
      },
      0,
      nowMs,
    );
  }

  /** Refused at arrival (429): counted, never routed. */
  #refuse(
    index: number,
    arrival: Arrival,
    measured: boolean,
    nowMs: number,
    scheduledMs?: number,
  ): void {
    this.#o.onRequest?.(refusedRecord(index, arrival, nowMs, scheduledMs));
    this.#rejected++;
    if (measured) this.#rejectedMeasured++;
    this.#ended();
  }

  /** Routes an admitted arrival, now or after `queueWaitMs` in the flow queue. */
  #start(held: HeldArrival<Arrival>, queueWaitMs: number, nowMs: number): void {
    const { arrival } = held;
    const measured = arrival.atMs >= this.#o.warmupMs;
    const { tokens, blockKeys } = this.#o.workload.materialize(arrival);
    this.#o.scaling?.observe(arrival, blockKeys);
    const req: Req = {
      id: `r${this.#nextId++}`,
      index: held.index,
      arrival,
      tokens,
      blockKeys,
      replica: -1,
      uncachedTokens: 0,
      firstTokenMs: Number.NaN,
      slot: this.#gaps.open(measured),
      rerouted: false,
      measured,
      tenant: held.tenant,
      queueWaitMs,
      avoid: this.#o.flow?.withoutRoom(this.#loads(), held) ?? null,
      onEngine: false,
      ...(held.scheduledMs !== undefined && { scheduledMs: held.scheduledMs }),
    };
    this.#requests.set(req.id, req);
    this.#peakInFlight = Math.max(this.#peakInFlight, this.#requests.size);
    const timeoutMs = this.#o.clientTimeoutMs;
    if (timeoutMs !== undefined)
      this.#push({ kind: 'timeout', req }, nowMs + timeoutMs, PRIORITY.arrival);
    this.#dispatch(req, nowMs);
  }

  /** Queued arrivals go while the pool has room (a step ended, a report came). */
  #drainFlow(nowMs: number): void {
    const flow = this.#o.flow;
    if (flow === undefined || flow.queued === 0) return;
    const loads = () => this.#loads();
    const matches = (h: HeldArrival<Arrival>) => this.#prefixBlocks(h, nowMs);
    for (
      let item = flow.takeNext(loads, nowMs, matches);
      item !== undefined;
      item = flow.takeNext(loads, nowMs, matches)
    ) {
      this.#start(item.payload, nowMs - item.arrivedMs, nowMs);
    }
  }

  /**
   * The router's view of how many prompt tokens of a held arrival each replica caches (flow
   * control's owner release); null when the router cannot tell.
   */
  #prefixBlocks(held: HeldArrival<Arrival>, nowMs: number): number[] | null {
    const router = this.#o.router;
    if (router.prefixBlocks === undefined) return null;
    let blockKeys = this.#heldKeys.get(held);
    if (blockKeys === undefined) {
      blockKeys = this.#o.workload.materialize(held.arrival).blockKeys;
      this.#heldKeys.set(held, blockKeys);
    }
    const blocks = router.prefixBlocks(blockKeys, nowMs);
    const blockSize = this.#o.workload.blockSize;
    return Array.from(blocks, (b) => Math.min(b * blockSize, held.arrival.promptLength));
  }

  /** Queued arrivals past their deadline end as 503. */
  #expireFlow(nowMs: number): void {
    for (const item of this.#o.flow?.takeExpired(nowMs) ?? []) {
      const { arrival, index } = item.payload;
      this.#error('expired');
      this.#o.onRequest?.({ ...refusedRecord(index, arrival, nowMs), error: 'expired' });
      this.#ended();
    }
  }

  #toRouter(r: Replica, report: ReplicaReport, nowMs: number): void {
    r.lastReport = report;
    this.#o.router.onReport(r.index, report, nowMs);
  }

  /** Each replica as the router sees it, for the saturation check (`src/flow/saturation.ts`). */
  #loads(): ReplicaLoad[] {
    const usPerToken = this.#o.prefillUsPerToken ?? 0;
    return this.#replicas.map((r) => {
      if (r.engine === null || r.phase !== 'serving') return { eligible: false };
      const load: ReplicaLoad = {
        eligible: true,
        queuedPromptTokens: r.queuedPromptTokens,
        queuedPrefillMs: (r.queuedPromptTokens * usPerToken) / 1000,
        prefillMsPerToken: usPerToken / 1000,
      };
      if (r.lastReport !== null) {
        load.waitingRequests = r.lastReport.waiting;
        load.kvUsage = r.lastReport.kvUsage;
      }
      return load;
    });
  }

  /**
   * Sends the arrivals held by the in-flight cap while it allows, in arrival order; each is sent
   * now (its clock starts at the send). Not re-entered: an arrival refused at once ends inside
   * `#onArrival`, and this loop sends the next one.
   */
  #send(nowMs: number): void {
    const cap = this.#o.maxConcurrency;
    if (cap === undefined || this.#sending) return;
    this.#sending = true;
    while (this.#waitHead < this.#waiting.length && this.#requests.size < cap) {
      const arrival = this.#waiting[this.#waitHead++]!;
      if (arrival.atMs === nowMs) this.#onArrival(arrival, nowMs);
      else this.#onArrival({ ...arrival, atMs: nowMs }, nowMs, arrival.atMs);
    }
    // Drop the sent ones now and then, so the queue stays as long as what waits.
    if (this.#waitHead > 1024 && this.#waitHead * 2 > this.#waiting.length) {
      this.#waiting.splice(0, this.#waitHead);
      this.#waitHead = 0;
    }
    this.#sending = false;
  }

  /**
   * The client gives `req` up: counted as `timeout` now, its engine aborts it (its blocks free at
   * once), and its later tokens and end, if a pending step carries them, are ignored.
   */
  #onTimeout(req: Req, nowMs: number): void {
    if (!this.#requests.has(req.id)) return;
    const r = this.#replicas[req.replica];
    if (r?.requests.delete(req.id)) {
      if (Number.isNaN(req.firstTokenMs)) r.queuedPromptTokens -= req.uncachedTokens;
      if (req.onEngine && r.engine !== null) r.engine.abort(req.id);
      this.#o.router.onFinished(req.id, nowMs);
    }
    this.#requests.delete(req.id);
    // A pending step may still carry its tokens: its slot is freed when that step ends.
    if (r?.busy) r.slotsAfterStep.push(req.slot);
    else this.#gaps.close(req.slot);
    this.#o.flow?.onFailed(req.tenant);
    this.#error('timeout');
    this.#record(req, 'timeout', nowMs);
    if (req.measured) this.#lastMeasuredEndMs = nowMs;
    this.#ended();
    // The freed blocks may let a waiting request in: an idle engine steps again.
    if (r !== undefined && !r.busy && r.engine !== null) this.#startStep(r, nowMs);
    if (r?.phase === 'draining') this.#leaveIfDrained(r, nowMs);
  }

  /** Routes `req` and hands it to the chosen engine; failures are counted, never dropped. */
  #dispatch(req: Req, nowMs: number): void {
    const router = this.#o.router;
    const decision = router.route(
      {
        id: req.id,
        blockKeys: req.blockKeys!,
        promptTokens: req.arrival.promptLength,
        blockSize: this.#o.workload.blockSize,
        customer: req.arrival.customer,
        ...(req.arrival.lora !== undefined && { lora: req.arrival.lora }),
        ...(req.avoid !== null && !req.rerouted && { avoidReplicas: req.avoid }),
      },
      nowMs,
    );
    const replica = decision?.replicaId ?? -1;
    const r = this.#replicas[replica];
    if (decision === null || r?.engine == null) {
      if (decision !== null) router.onFinished(req.id, nowMs);
      this.#fail(req, 'no-replica', nowMs);
      return;
    }
    const admitRoute = this.#o.admitRoute;
    if (
      admitRoute !== undefined &&
      !req.rerouted &&
      !admitRoute(r.queuedPromptTokens, decision.uncachedTokens)
    ) {
      router.onFinished(req.id, nowMs);
      this.#leave(req);
      this.#o.flow?.onRefused(req.tenant);
      this.#o.onRequest?.(refusedRecord(req.index, req.arrival, nowMs, req.scheduledMs));
      this.#rejected++;
      if (req.measured) this.#rejectedMeasured++;
      this.#ended();
      return;
    }
    const overheadMs =
      perReplica(this.#o.requestOverheadMs, replica) +
      perReplica(this.#o.requestOverheadMsPerPromptToken, replica) * req.arrival.promptLength;
    if (overheadMs <= 0) {
      if (!this.#add(r, req, nowMs)) return;
      this.#assign(r, req, decision.uncachedTokens);
      if (!r.busy) this.#startStep(r, nowMs);
      return;
    }
    this.#assign(r, req, decision.uncachedTokens);
    this.#push({ kind: 'handOff', replica, gen: r.gen, req }, nowMs + overheadMs, PRIORITY.arrival);
  }

  /** A routed request's engine takes it, `requestOverheadMs` after the routing. */
  #handOff(r: Replica, req: Req, nowMs: number): void {
    if (!this.#add(r, req, nowMs)) {
      r.requests.delete(req.id);
      r.queuedPromptTokens -= req.uncachedTokens;
      if (r.phase === 'draining') this.#leaveIfDrained(r, nowMs);
      return;
    }
    if (!r.busy) this.#startStep(r, nowMs);
  }

  /** Hands `req` to the replica's engine; a refusal fails the request (false). */
  #add(r: Replica, req: Req, nowMs: number): boolean {
    try {
      r.engine!.add({
        id: req.id,
        promptTokens: req.tokens!,
        maxNewTokens: req.arrival.outputTokens,
        arrivalMs: req.arrival.atMs,
        // The workload keys prompts with the engine's own chaining: no need to hash them twice.
        blockKeys: req.blockKeys!,
        handle: req.slot,
        ...(req.arrival.lora !== undefined && { loraName: req.arrival.lora }),
      });
      req.onEngine = true;
    } catch (err) {
      this.#o.router.onFinished(req.id, nowMs);
      const code = (err as { code?: unknown }).code;
      this.#fail(req, typeof code === 'string' ? code : 'engine-error', nowMs);
      return false;
    }
    if (!this.#keepPrompts) {
      // Nothing will re-route it: let the prompt go now rather than hold it until the first
      // token, so it dies young instead of being copied by every garbage collection meanwhile.
      req.tokens = null;
      req.blockKeys = null;
    }
    return true;
  }

  /** The request is the replica's: re-routed if it dies, counted in its queue. */
  #assign(r: Replica, req: Req, uncachedTokens: number): void {
    req.replica = r.index;
    r.requests.set(req.id, req);
    req.uncachedTokens = uncachedTokens;
    r.queuedPromptTokens += uncachedTokens;
  }

  #startStep(r: Replica, nowMs: number): void {
    const engine = r.engine;
    if (engine === null || !engine.hasWork()) return;
    const result = engine.step();
    this.#steps++;
    const idle =
      result.durationMs <= 0 &&
      result.emitted.length === 0 &&
      result.finished.length === 0 &&
      result.events.length === 0;
    // An engine that can schedule nothing waits for the next arrival rather than spin.
    if (idle) return;
    r.busy = true;
    r.pending = result;
    const emitted = result.emitted;
    if (emitted.length > r.pendingSlots.length) {
      r.pendingSlots = new Int32Array(Math.max(emitted.length, 2 * r.pendingSlots.length));
    }
    for (let i = 0; i < emitted.length; i++) r.pendingSlots[i] = emitted[i]!.handle;
    r.stepStartMs = nowMs;
    const ev = r.stepEvent;
    ev.timeMs = nowMs + Math.max(0, result.durationMs);
    ev.gen = r.gen;
    this.#queue.push(ev);
  }

  #onStepEnd(index: number, gen: number, nowMs: number): void {
    const r = this.#replicas[index]!;
    if (gen !== r.gen || r.pending === null) return;
    const result = r.pending;
    r.pending = null;
    r.busy = false;
    this.#busy.add(index, nowMs - r.stepStartMs);
    this.#onEmitted(r, result.emitted, nowMs);
    if (r.slotsAfterStep.length > 0) {
      for (const slot of r.slotsAfterStep) this.#gaps.close(slot);
      r.slotsAfterStep.length = 0;
    }
    this.#onFinished(r, result.finished, nowMs);
    if (result.events.length > 0) this.#onKvEvents(r, result.events, nowMs);
    if (this.#freshReports && r.phase === 'serving')
      this.#toRouter(r, this.#report(r, nowMs), nowMs);
    this.#startStep(r, nowMs);
    if (r.phase === 'draining') this.#leaveIfDrained(r, nowMs);
  }

  #onEmitted(r: Replica, emitted: readonly TokenEmitted[], nowMs: number): void {
    const itl = this.#log.itlMs;
    const gaps = this.#gaps;
    const slots = r.pendingSlots;
    for (let i = 0; i < emitted.length; i++) {
      // Every token's engine holds its request, given with its slot: a later token needs only
      // the slot (copied out at the step's start); the first one (once a request) updates the
      // record, found by id.
      const slot = slots[i]!;
      const gapMs = gaps.tick(slot, nowMs);
      if (!Number.isNaN(gapMs)) {
        if (gaps.measured(slot)) itl.add(gapMs);
        continue;
      }
      const req = r.requests.get(emitted[i]!.id);
      if (req === undefined) continue;
      req.firstTokenMs = nowMs;
      req.tokens = null;
      req.blockKeys = null;
      r.queuedPromptTokens -= req.uncachedTokens;
      this.#o.router.onFirstToken(req.id, nowMs);
      const stop = this.#o.earlyStop;
      if (
        req.measured &&
        stop !== undefined &&
        nowMs - req.arrival.atMs > stop.ttftLimitMs(req.arrival.promptLength)
      ) {
        this.#ttftViolations++;
        this.#checkEarlyStop();
      }
    }
  }

  #onFinished(r: Replica, finished: readonly RequestFinished[], nowMs: number): void {
    for (let i = 0; i < finished.length; i++) {
      const f = finished[i]!;
      const req = r.requests.get(f.id);
      if (req === undefined) continue;
      r.requests.delete(f.id);
      this.#leave(req);
      this.#o.router.onFinished(f.id, nowMs);
      if (req.measured) this.#lastMeasuredEndMs = nowMs;
      this.#ended();
      if (f.reason === 'abort' || Number.isNaN(req.firstTokenMs)) {
        this.#o.flow?.onFailed(req.tenant);
        this.#error('aborted');
        this.#record(req, 'aborted', nowMs, f.cachedTokens);
        continue;
      }
      this.#completed++;
      const ttftMs = req.firstTokenMs - req.arrival.atMs;
      this.#o.flow?.onServed(req.tenant, req.measured, ttftMs, req.queueWaitMs);
      const tpotMs =
        f.outputTokens > 1 ? (nowMs - req.firstTokenMs) / (f.outputTokens - 1) : Number.NaN;
      this.#o.onRequest?.({
        id: req.index,
        customer: req.arrival.customer,
        arrivalMs: req.arrival.atMs,
        replica: r.index,
        promptTokens: f.promptTokens,
        cachedTokens: f.cachedTokens,
        ...(f.resumedPrefixTokens && { resumedPrefixTokens: f.resumedPrefixTokens }),
        ...(this.#o.flow && { tenant: req.tenant, queueWaitMs: req.queueWaitMs }),
        ttftMs,
        tpotMs,
        endMs: nowMs,
        ...(req.scheduledMs !== undefined && { scheduledMs: req.scheduledMs }),
      });
      if (!req.measured) continue;
      if (tpotMs > (this.#o.earlyStop?.tpotLimitMs ?? Infinity)) {
        this.#tpotViolations++;
        this.#checkEarlyStop();
      }
      this.#log.add({
        arrivalMs: req.arrival.atMs,
        customer: req.arrival.customer,
        replica: r.index,
        ttftMs,
        e2eMs: nowMs - req.arrival.atMs,
        tpotMs,
        promptTokens: f.promptTokens,
        cachedTokens: f.cachedTokens,
        rerouted: req.rerouted,
      });
    }
  }

  #onKvEvents(r: Replica, events: KvEvent[], nowMs: number): void {
    this.#owners.apply(r.index, events);
    const router = this.#o.router;
    if (!router.wantsEvents || r.phase !== 'serving') return;
    const delayMs = this.#o.view.eventDelayMs;
    if (delayMs <= 0) router.applyEvents(r.index, events, nowMs);
    else {
      this.#push(
        { kind: 'kvEvents', replica: r.index, gen: r.gen, events },
        nowMs + delayMs,
        PRIORITY.kvEvents,
      );
    }
  }

  #report(r: Replica, nowMs: number): ReplicaReport {
    const c = r.engine!.counters();
    const report: ReplicaReport = {
      kvUsage: c.kvUsage,
      running: c.running,
      waiting: c.waiting,
      queuedPromptTokens: r.queuedPromptTokens,
      reportedAtMs: nowMs,
    };
    if (c.lora) {
      report.loras = {
        running: c.lora.running,
        waiting: c.lora.waiting,
        maxLoras: c.lora.maxLoras,
      };
    }
    return report;
  }

  #onReportTick(nowMs: number): void {
    const reports: [number, number, ReplicaReport][] = [];
    for (const r of this.#replicas) {
      if (r.engine === null) continue;
      const report = this.#report(r, nowMs);
      if (r.phase === 'serving') reports.push([r.index, r.gen, report]);
      this.#load.add(r.index, nowMs, report.queuedPromptTokens, report.kvUsage);
    }
    const { staleMs, reportMs } = this.#o.view;
    if (staleMs <= 0) this.#handle({ kind: 'report', reports, timeMs: nowMs, priority: 0, seq: 0 });
    else this.#push({ kind: 'report', reports }, nowMs + staleMs, PRIORITY.report);
    if (this.#live()) this.#push({ kind: 'reportTick' }, nowMs + reportMs, PRIORITY.reportTick);
  }

  /** A planner round: the count it wants, then the next round while the run is live. */
  #onScale(nowMs: number): void {
    const scaling = this.#o.scaling!;
    const desired = scaling.desired(nowMs);
    if (desired !== null) this.#resize(Math.max(1, Math.round(desired)), nowMs);
    // Rounds end with the arrivals: what is left in flight only drains.
    if (!this.#arrivalsDone) {
      this.#push({ kind: 'scale' }, nowMs + scaling.intervalMs, PRIORITY.reportTick);
    }
  }

  /**
   * Serving and starting replicas to `count`: new ones start (routable `startupMs` later); to
   * shrink, the newest starting ones are cancelled first, then the newest serving ones drain
   * (newest first, as a Kubernetes ReplicaSet prefers not-ready and younger pods).
   */
  #resize(count: number, nowMs: number): void {
    const starting = this.#replicas.filter((r) => r.phase === 'starting');
    const serving = this.#replicas.filter((r) => r.phase === 'serving' && r.engine !== null);
    let have = starting.length + serving.length;
    if (have === count) return;
    for (; have < count; have++) this.#startReplica(nowMs);
    for (; have > count; have--) {
      const cancelled = starting.pop();
      if (cancelled !== undefined) {
        cancelled.engine = null;
        cancelled.gen++;
        cancelled.phase = 'gone';
        continue;
      }
      const r = serving.pop()!;
      r.phase = 'draining';
      this.#o.router.removeReplica!(r.index, nowMs);
      this.#leaveIfDrained(r, nowMs);
    }
    this.#logScaling(nowMs);
  }

  /** A new replica, cold, numbered after every earlier one: it joins the router after start-up. */
  #startReplica(nowMs: number): void {
    const index = this.#replicas.length;
    const r = new Replica(index, this.#o.makeEngine(index));
    r.phase = 'starting';
    this.#replicas.push(r);
    this.#busy.ensureReplicas(index + 1);
    this.#load.ensureReplicas(index + 1);
    this.#owners.ensureReplicas(index + 1);
    this.#push(
      { kind: 'ready', replica: index, gen: r.gen },
      nowMs + this.#o.scaling!.startupMs,
      PRIORITY.fault,
    );
  }

  /** Start-up is over: the replica joins the router, and its first report with it. */
  #onReady(index: number, gen: number, nowMs: number): void {
    const r = this.#replicas[index]!;
    if (r.gen !== gen || r.phase !== 'starting' || r.engine === null) return;
    r.phase = 'serving';
    this.#o.router.addReplica!(index, nowMs);
    this.#toRouter(r, this.#report(r, nowMs), nowMs);
    this.#logScaling(nowMs);
    this.#drainFlow(nowMs);
  }

  /** A draining replica with nothing left in flight leaves the fleet. */
  #leaveIfDrained(r: Replica, nowMs: number): void {
    if (r.requests.size > 0 || r.busy) return;
    r.engine = null;
    r.gen++;
    r.stepEvent = r.makeStepEvent();
    r.phase = 'gone';
    this.#owners.clear(r.index);
    this.#logScaling(nowMs);
  }

  #logScaling(nowMs: number): void {
    const point: ScalingPoint = { atMs: nowMs, serving: 0, starting: 0, draining: 0 };
    for (const r of this.#replicas) {
      if (r.phase === 'starting') point.starting++;
      else if (r.phase === 'draining') point.draining++;
      else if (r.phase === 'serving' && r.engine !== null) point.serving++;
    }
    const last = this.#scalingLog[this.#scalingLog.length - 1];
    if (last?.atMs === nowMs) this.#scalingLog[this.#scalingLog.length - 1] = point;
    else this.#scalingLog.push(point);
  }

  #kill(fault: FaultSpec, nowMs: number): void {
    const r = this.#replicas[fault.replica];
    if (r === undefined || r.engine === null) return;
    const owned = this.#owners.ownedBy(r.index);
    const customers = owned.filter((c) => this.#owners.owners(c) === 1);
    const sharedCustomers = owned.length - customers.length;
    r.engine = null;
    r.gen++;
    r.stepEvent = r.makeStepEvent();
    if (r.busy) this.#busy.add(r.index, nowMs - r.stepStartMs);
    r.busy = false;
    r.pending = null;
    for (const slot of r.slotsAfterStep) this.#gaps.close(slot);
    r.slotsAfterStep.length = 0;
    r.queuedPromptTokens = 0;
    this.#owners.clear(r.index);
    this.#o.router.markDown(r.index, nowMs);
    const stranded = [...r.requests.values()];
    r.requests.clear();
    let rerouted = 0;
    let errors = 0;
    for (const req of stranded) {
      this.#o.router.onFinished(req.id, nowMs);
      if (Number.isNaN(req.firstTokenMs)) {
        req.rerouted = true;
        this.#rerouted++;
        rerouted++;
        this.#dispatch(req, nowMs);
      } else {
        errors++;
        this.#fail(req, 'killed-mid-stream', nowMs);
      }
    }
    this.#faultLog.push({ fault, customers, sharedCustomers, rerouted, errors });
  }

  #revive(index: number, nowMs: number): void {
    const r = this.#replicas[index];
    if (r === undefined || r.engine !== null) return;
    r.engine = this.#o.makeEngine(index);
    this.#o.router.markUp(index, nowMs);
    this.#toRouter(r, this.#report(r, nowMs), nowMs);
    this.#faultLog.push({
      fault: { kind: 'revive', replica: index, atMs: nowMs },
      customers: [],
      sharedCustomers: 0,
      rerouted: 0,
      errors: 0,
    });
  }

  /** The live replicas' queues, as the admission bound reads them. */
  #queues(): QueueView[] {
    const views: QueueView[] = [];
    for (const r of this.#replicas) {
      if (r.engine !== null && r.phase === 'serving')
        views.push({ queuedPromptTokens: r.queuedPromptTokens, eligible: true });
    }
    return views;
  }

  /** The request is no longer in flight: its slot goes to a later one (once). */
  #leave(req: Req): void {
    if (this.#requests.delete(req.id)) this.#gaps.close(req.slot);
  }

  #fail(req: Req, kind: string, nowMs: number): void {
    this.#o.flow?.onFailed(req.tenant);
    this.#leave(req);
    this.#error(kind);
    this.#record(req, kind, nowMs);
    if (req.measured) this.#lastMeasuredEndMs = nowMs;
    this.#ended();
  }

  /**
   * A request ended (done, failed or refused): in a closed loop, the next one starts now; under
   * the client's in-flight cap, the next waiting one is sent now.
   */
  #ended(): void {
    if (this.#stageGate?.holding) this.#releaseStage();
    if (this.#o.maxConcurrency !== undefined) {
      // As its own event: an end is handled inside a step's end, whose replica is not stepped
      // again until that handler is done.
      if (this.#waitHead < this.#waiting.length) {
        this.#push({ kind: 'send' }, this.#clock.nowMs, PRIORITY.arrival);
      }
      return;
    }
    if (this.#o.concurrency === undefined) return;
    const next = this.#nextArrival();
    if (next) this.#queue.push(next);
  }

  /** The next stage starts once nothing sent before is in flight, waiting or queued. */
  #releaseStage(): void {
    if (this.#requests.size > 0 || this.#waitHead < this.#waiting.length) return;
    if ((this.#o.flow?.queued ?? 0) > 0) return;
    const arrival = this.#stageGate!.release(this.#clock.nowMs);
    if (arrival === null) return;
    this.#push({ kind: 'arrival', arrival }, arrival.atMs, PRIORITY.arrival);
  }

  /** A failed or unfinished request's record (`onRequest`); `endMs` null: it never ended. */
  #record(req: Req, error: string, endMs: number | null, cachedTokens: number | null = null): void {
    const onRequest = this.#o.onRequest;
    if (onRequest === undefined) return;
    const ttftMs = req.firstTokenMs - req.arrival.atMs;
    onRequest({
      id: req.index,
      customer: req.arrival.customer,
      arrivalMs: req.arrival.atMs,
      replica: req.replica >= 0 ? req.replica : null,
      promptTokens: req.arrival.promptLength,
      cachedTokens,
      ttftMs: Number.isNaN(ttftMs) ? null : ttftMs,
      tpotMs: null,
      endMs,
      error,
      ...(req.scheduledMs !== undefined && { scheduledMs: req.scheduledMs }),
    });
  }

  #error(kind: string): void {
    this.#errors[kind] = (this.#errors[kind] ?? 0) + 1;
  }

  #checkEarlyStop(): void {
    const stop = this.#o.earlyStop;
    if (!stop) return;
    // p99 misses the target once more than n - ceil(0.99 n) measured requests exceed it.
    const allowed = (n: number): number => n - Math.ceil(0.99 * n);
    if (
      this.#ttftViolations > allowed(stop.expectedMeasured) ||
      this.#tpotViolations > allowed(stop.expectedMeasuredTpot)
    ) {
      this.#stoppedEarly = true;
    }
  }
}

/**
 * A per-replica figure; absent: 0. A replica made mid-run (`scaling`, numbered past the list)
 * has the last one's: a fleet that changes size is of one hardware.
 */
function perReplica(values: readonly number[] | undefined, replica: number): number {
  if (values === undefined) return 0;
  return values[replica] ?? values[values.length - 1] ?? 0;
}

/** A request refused at arrival by admission: it never reached a replica. */
function refusedRecord(
  index: number,
  arrival: Arrival,
  nowMs: number | null,
  scheduledMs?: number,
): FleetRequestRecord {
  return {
    id: index,
    customer: arrival.customer,
    arrivalMs: arrival.atMs,
    replica: null,
    promptTokens: arrival.promptLength,
    cachedTokens: null,
    ttftMs: null,
    tpotMs: null,
    endMs: nowMs,
    error: 'rejected',
    ...(scheduledMs !== undefined && { scheduledMs }),
  };
}
