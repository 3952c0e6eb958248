/**
 * Flow control in front of one model pool: while the router's view says every eligible replica
 * of the pool is saturated (`src/flow/saturation.ts`), a request waits here, in the pure
 * `FlowQueue` (`src/flow/flowQueue.ts`: strict priority between classes, weighted fair share by
 * tokens between tenants inside a class, FIFO inside a tenant), instead of being sent to an
 * engine already behind. This is the shell around the core: it reads the clock, holds each
 * waiting request's promise, and dispatches.
 *
 * - **Enter**: nobody waiting and the pool not saturated: the request goes on at once (no
 *   promise, so it routes in the same turn and the next arrival sees it in the ledger).
 *   Otherwise it queues; a full queue (or the tenant's share of it full) is a 429 with
 *   `Retry-After`, as llm-d's flow controller answers `QueueOutcomeRejectedCapacity`
 *   (llm-d-inference-scheduler `pkg/epp/requestcontrol/admission.go`,
 *   `translateFlowControlOutcome`: ResourceExhausted, 429).
 * - **Dispatch**: on every change of the pool's load (a request's first token or end, a load
 *   report: `ModelPool.onLoadChange`) and on a bounded tick, one request leaves while the pool
 *   is not saturated; the next check waits for the turn after (`setImmediate`), when the request
 *   just released has been routed and the ledger counts it. Which one: the queue's head (room
 *   release), or with `readiness` (owner release) the first in the queue's order that is ready,
 *   at most `lookAhead` deep into each tenant's queue (`FlowQueue.dequeue`); one that is not
 *   ready waits while those behind it pass, and the tick looks again as its hold runs out.
 * - **Deadline**: a request still queued `maxWaitMs` after it arrived is a 503 with
 *   `Retry-After` (llm-d: `QueueOutcomeEvictedTTL`, ServiceUnavailable, 503). The tick runs
 *   while anything waits, so a deadline is kept within one tick.
 * - **Cancel**: a client that leaves while queued (its `AbortSignal`) is removed at once, its
 *   place freed; nothing is sent to any engine.
 *
 * `Retry-After` is the queue's drain time at the rate requests left it over the last
 * RATE_WINDOW_MS (at least 1 s, at most the deadline; the deadline while nothing left).
 */
import { FlowQueue, type FlowClass, type FlowItem, mayPassWithin } from '../flow/index.ts';
import type { BlockKey } from '../kv/blockKey.ts';
import { ApiError } from '../openai/errors.ts';
import { RATE_LIMIT_TYPE } from './admission.ts';
import type { FlowMetrics, FlowQueuedSample } from './flowMetrics.ts';

const RATE_WINDOW_MS = 10_000;

/** Why a request did not get through the queue (the client left: `FlowCancelled`). */
export class FlowCancelled extends Error {
  constructor() {
    super('the client left while its request waited in the flow-control queue');
    this.name = 'FlowCancelled';
  }
}

export interface FlowRequest {
  id: string;
  /** The tenant's name; '' for a request without one. */
  tenant: string;
  priorityClass: string;
  costTokens: number;
  /** The prompt's block keys (owner release reads where they are cached); absent: unknown. */
  prefix?: { blockKeys: readonly BlockKey[]; blockSize: number };
}

/**
 * How a request leaves the queue: `replica`, the one it is to be routed to (finish-first
 * chose it) or null (the router chooses among the replicas with room); `chargeTokens`, what it
 * costs its tenant in the fair share when not its prompt tokens (uncached charging).
 */
export interface FlowPass {
  replica: string | null;
  chargeTokens?: number;
  /**
   * Owner release: it goes warm (a replica with room caches its prompt) or where finish-first
   * chose, so it may pass the requests of its tenant ahead of it that would go cold
   * (`FlowGateOptions.passMs`).
   */
  preferred?: boolean;
}

/** Any replica with room: the pass of room release. */
const ANY_REPLICA: FlowPass = { replica: null };

/**
 * Whether a request that waited `waitedMs` may leave now, and how (null: not yet); `sparse`:
 * its tenant has nothing else queued. Made once per dispatch check.
 */
export type FlowReadiness = (
  req: FlowRequest,
  waitedMs: number,
  sparse: boolean,
) => FlowPass | null;

export interface FlowGateOptions {
  classes: FlowClass[];
  tenantWeights: Record<string, number>;
  maxQueued: number;
  maxQueuedPerTenant: number;
  maxWaitMs: number;
  /** The pool's saturation now (the router's view through `isPoolSaturated`). */
  saturated(): boolean;
  /**
   * Owner release: the readiness of waiting requests against the pool's load now; absent (or
   * null) for room release, where the head goes whenever the pool is not saturated.
   */
  readiness?(): FlowReadiness | null;
  /** Owner release: how deep into each tenant's queue a ready request is looked for. */
  lookAhead?: number;
  /**
   * Owner release: a preferred request passes the earlier ones of its tenant that are only
   * ready while they have waited less than this, ms (`mayPassWithin`); 0 or absent: never.
   */
  passMs?: number;
  /** The metrics' `pool` label and its tenant label. */
  poolLabel: string;
  tenantLabel(tenant: string): string;
  metrics: FlowMetrics;
  /** The wall clock, ms (performance.now in the servers; a test's own). */
  nowMs(): number;
}

interface Waiter {
  req: FlowRequest;
  resolve(pass: FlowPass): void;
  reject(err: Error): void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

/** What a config reload may change in a gate (`PoolFlowGate.reconfigure`). */
export type FlowGateSettings = Pick<
  FlowGateOptions,
  | 'classes'
  | 'tenantWeights'
  | 'maxQueued'
  | 'maxQueuedPerTenant'
  | 'maxWaitMs'
  | 'lookAhead'
  | 'passMs'
>;

export class PoolFlowGate {
  #o: FlowGateOptions;
  readonly #queue: FlowQueue<Waiter>;
  #tick: NodeJS.Timeout | null = null;
  #pumpScheduled = false;
  #closed = false;
  /** Dispatch times of the last RATE_WINDOW_MS, oldest first. */
  readonly #recent: number[] = [];

  constructor(options: FlowGateOptions) {
    this.#o = options;
    this.#queue = new FlowQueue<Waiter>({
      classes: options.classes,
      tenantWeights: options.tenantWeights,
      maxQueued: options.maxQueued,
      maxQueuedPerTenant: options.maxQueuedPerTenant,
      maxWaitMs: options.maxWaitMs,
    });
  }

  /**
   * New settings from a config reload (`FlowQueue.reconfigure`: waiting requests keep their
   * places; the new deadline applies to them, the new bounds to later arrivals). The next
   * check runs now: a request that a new setting lets go leaves.
   */
  reconfigure(settings: FlowGateSettings): void {
    this.#queue.reconfigure({
      classes: settings.classes,
      tenantWeights: settings.tenantWeights,
      maxQueued: settings.maxQueued,
      maxQueuedPerTenant: settings.maxQueuedPerTenant,
      maxWaitMs: settings.maxWaitMs,
    });
    this.#o = { ...this.#o, ...settings };
    if (this.#tick !== null) {
      this.#stopTick();
      this.#startTick();
    }
    this.pump();
  }

  /** Requests waiting now. */
  get size(): number {
    return this.#queue.size;
  }

  /**
   * A pass: go on now. Otherwise the request waits: the promise resolves with its pass when it
   * may go on, and rejects with a 503 ApiError past its deadline or FlowCancelled when `signal`
   * aborts. Throws a 429 ApiError when the queue has no room for it.
   */
  enter(req: FlowRequest, signal?: AbortSignal): Promise<FlowPass> | FlowPass {
    const nowMs = this.#o.nowMs();
    this.#expire(nowMs);
    if (this.#queue.size === 0 && !this.#o.saturated()) {
      const ready = this.#o.readiness?.() ?? null;
      // Nothing queued: its tenant is sparse.
      const pass = ready === null ? ANY_REPLICA : ready(req, 0, true);
      if (pass !== null) return pass;
    }
    if (signal?.aborted) throw new FlowCancelled();
    let waiter!: Waiter;
    const promise = new Promise<FlowPass>((resolve, reject) => {
      waiter = { req, resolve, reject, signal, onAbort: undefined };
    });
    const verdict = this.#queue.enqueue({
      id: req.id,
      tenant: req.tenant,
      priorityClass: req.priorityClass,
      costTokens: Math.max(1, req.costTokens),
      arrivedMs: nowMs,
      payload: waiter,
    });
    if (!verdict.ok) {
      if (verdict.reason === 'unknown-class') {
        throw new ApiError(
          'ERR_BAD_REQUEST',
          `unknown priority class '${req.priorityClass}'`,
          null,
        );
      }
      this.#count(this.#o.metrics.rejected, req, verdict.reason);
      throw this.#full(verdict.reason);
    }
    if (signal) {
      waiter.onAbort = () => this.#cancel(req.id);
      signal.addEventListener('abort', waiter.onAbort, { once: true });
    }
    this.#startTick();
    // A request of a higher class, or the first one after a change nobody reported, may go now.
    this.pump();
    return promise;
  }

  /** The pool's load changed: dispatch what it has room for. */
  pump(): void {
    if (this.#pumpScheduled || this.#closed) return;
    this.#dispatchOne();
  }

  /** What waits now, by class and tenant, labelled for the metrics. */
  queued(): FlowQueuedSample[] {
    const out: FlowQueuedSample[] = [];
    for (const c of this.#queue.stats().classes) {
      for (const t of c.tenants) {
        out.push({
          pool: this.#o.poolLabel,
          priorityClass: c.name,
          tenant: this.#o.tenantLabel(t.tenant),
          queued: t.queued,
        });
      }
    }
    return out;
  }

  /** Shutdown: every waiting request is answered 503 now. */
  close(): void {
    this.#closed = true;
    this.#stopTick();
    for (const item of this.#queue.expire(Number.POSITIVE_INFINITY)) {
      this.#settle(item).reject(
        new ApiError('ERR_UNAVAILABLE', 'the gateway is shutting down', null, { retryAfterS: 1 }),
      );
    }
  }

  #dispatchOne(): void {
    const nowMs = this.#o.nowMs();
    this.#expire(nowMs);
    if (this.#queue.size === 0) {
      this.#stopTick();
      return;
    }
    if (this.#o.saturated()) return;
    const ready = this.#o.readiness?.() ?? null;
    // The pass of each item `ready` accepted, by id: `dequeue` takes one of them, and charges it.
    const passes = new Map<string, FlowPass>();
    const passMs = this.#o.passMs ?? 0;
    const item =
      ready === null
        ? this.#queue.dequeue()
        : this.#queue.dequeue(
            (i) => {
              const p = ready(
                i.payload.req,
                nowMs - i.arrivedMs,
                this.#queue.sizeOf(i.tenant) === 1,
              );
              if (p === null) return false;
              passes.set(i.id, p);
              return p.preferred === true ? 'preferred' : true;
            },
            this.#o.lookAhead ?? 1,
            (i) => passes.get(i.id)?.chargeTokens ?? i.costTokens,
            passMs > 0 ? mayPassWithin(nowMs, passMs) : undefined,
          );
    if (item === undefined) return;
    const pass = passes.get(item.id) ?? ANY_REPLICA;
    const waiter = this.#settle(item);
    const labels = this.#labels(item);
    this.#o.metrics.dispatched.series(...labels).inc();
    this.#o.metrics.wait.series(...labels).observe(Math.max(0, nowMs - item.arrivedMs) / 1000);
    this.#recent.push(nowMs);
    waiter.resolve(pass);
    if (this.#queue.size === 0) {
      this.#stopTick();
      return;
    }
    // The next one once the request just released has routed (its continuation runs first).
    this.#pumpScheduled = true;
    setImmediate(() => {
      this.#pumpScheduled = false;
      if (!this.#closed) this.#dispatchOne();
    });
  }

  #expire(nowMs: number): void {
    for (const item of this.#queue.expire(nowMs)) {
      this.#count(this.#o.metrics.rejected, item, 'expired');
      this.#settle(item).reject(
        new ApiError(
          'ERR_UNAVAILABLE',
          `every replica of the pool stayed saturated: the request waited ${Math.round(nowMs - item.arrivedMs)} ms in the flow-control queue (the limit is ${this.#o.maxWaitMs} ms)`,
          null,
          { retryAfterS: this.#retryAfterS(nowMs) },
        ),
      );
    }
  }

  #cancel(id: string): void {
    const item = this.#queue.remove(id);
    if (item === undefined) return;
    this.#count(this.#o.metrics.cancelled, item);
    this.#settle(item).reject(new FlowCancelled());
    // Its place is free: a request behind it may now fit the bound, or go.
    if (this.#queue.size === 0) this.#stopTick();
  }

  /** The item's waiter, detached from its signal. */
  #settle(item: FlowItem<Waiter>): Waiter {
    const w = item.payload;
    if (w.signal && w.onAbort) w.signal.removeEventListener('abort', w.onAbort);
    return w;
  }

  #full(reason: 'queue-full' | 'tenant-full'): ApiError {
    const nowMs = this.#o.nowMs();
    const [what, limit, param] =
      reason === 'queue-full'
        ? ['the flow-control queue is full', this.#o.maxQueued, 'flow_max_queued']
        : [
            "this tenant's share of the flow-control queue is full",
            this.#o.maxQueuedPerTenant,
            'flow_max_queued_per_tenant',
          ];
    return new ApiError(
      'ERR_RATE_LIMITED',
      `the fleet is saturated and ${what} (${limit} requests waiting)`,
      param,
      { retryAfterS: this.#retryAfterS(nowMs), type: RATE_LIMIT_TYPE },
    );
  }

  /** Seconds for the queue to drain at the rate it drained lately; the deadline if it did not. */
  #retryAfterS(nowMs: number): number {
    while (this.#recent.length > 0 && this.#recent[0]! < nowMs - RATE_WINDOW_MS) {
      this.#recent.shift();
    }
    const maxS = Math.max(1, Math.ceil(this.#o.maxWaitMs / 1000));
    if (this.#recent.length === 0) return maxS;
    const perS = this.#recent.length / (RATE_WINDOW_MS / 1000);
    return Math.min(maxS, Math.max(1, Math.ceil(this.#queue.size / perS)));
  }

  #labels(item: { tenant: string; priorityClass: string }): [string, string, string] {
    return [this.#o.poolLabel, item.priorityClass, this.#o.tenantLabel(item.tenant)];
  }

  #count(
    counter: FlowMetrics['rejected'],
    item: { tenant: string; priorityClass: string },
    reason?: string,
  ): void {
    const labels = this.#labels(item);
    (reason === undefined ? counter.series(...labels) : counter.series(...labels, reason)).inc();
  }

  #startTick(): void {
    if (this.#tick !== null) return;
    // Deadlines kept within a tick; the tick also catches a change no hook reported.
    const everyMs = Math.min(250, Math.max(10, this.#o.maxWaitMs / 10));
    this.#tick = setInterval(() => this.pump(), everyMs);
    this.#tick.unref();
  }

  #stopTick(): void {
    if (this.#tick === null) return;
    clearInterval(this.#tick);
    this.#tick = null;
  }
}
