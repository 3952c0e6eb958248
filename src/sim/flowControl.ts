/**
 * Flow control in the simulator, with the gateway's own core (`src/flow/`): tenants drawn per
 * arrival, the pool's saturation read from the simulated router's view, and a `FlowQueue` that
 * holds arrivals while every replica is saturated.
 *
 * - Each arrival gets a tenant, drawn by share from a PRNG seeded with the run's seed, in arrival
 *   order: the same seed gives every run (flow control on or off) the same tenant per request.
 * - With flow control on, an arrival waits in the queue when the pool is saturated or others
 *   already wait (no overtaking the queue); it is refused at once (429) when the queue's bounds
 *   are reached, and ends as 503 when it has waited `maxWaitMs`. Whenever a replica may have
 *   left saturation (a step ended, a report reached the router), queued requests are dispatched,
 *   in the queue's order, until the pool is saturated again. With owner release, a request of
 *   a tenant with nothing else queued goes where its prefill ends first, and what leaves is
 *   charged its uncached prompt tokens (`SimFlowControl.charge`, `.sparseFinishFirst`).
 * - Per tenant: arrivals, served, 429, 503, other failures, and over the measured requests TTFT
 *   (from arrival, queue wait included) and queue wait percentiles.
 */
import { type FlowItem, FlowQueue } from '../flow/flowQueue.ts';
import {
  DEFAULT_FLOW_CHARGE,
  DEFAULT_LOOK_AHEAD,
  DEFAULT_OWNER_HOLD_MS,
  DEFAULT_OWNER_SLACK_TOKENS,
  DEFAULT_SPARSE_FINISH_FIRST,
  FLOW_CHARGES,
  FLOW_RELEASES,
  type FlowCharge,
  type FlowRelease,
  finishFirstReplica,
  uncachedCharge,
} from '../flow/ownerRelease.ts';
import {
  DEFAULT_SATURATION_LIMITS,
  hasGoodCapacity,
  isPoolSaturated,
  type ReplicaLoad,
  type SaturationLimits,
} from '../flow/saturation.ts';
import type { ReadyVerdict } from '../flow/flowQueue.ts';
import { DEFAULT_OWNER_PASS_MS, mayPassWithin, ownerVerdict } from '../flow/ownerRelease.ts';
import { summarize } from '../results/stats.ts';
import type { FlowResult, TenantFlowResult } from '../results/flowTable.ts';
import { Rng } from '../util/rng.ts';

/** Priority classes, as llm-d names its criticalities: critical first, sheddable last. */
export const FLOW_CLASSES = [
  { name: 'critical', priority: 2 },
  { name: 'standard', priority: 1 },
  { name: 'sheddable', priority: 0 },
] as const;
export type FlowClassName = (typeof FLOW_CLASSES)[number]['name'];
export const DEFAULT_FLOW_CLASS: FlowClassName = 'standard';

export interface TenantSpec {
  name: string;
  /** Share of arrivals, > 0 (the shares are normalized to sum to 1). */
  share: number;
  /** Weight in the fair share inside its class (default 1). */
  weight: number;
  priorityClass: FlowClassName;
}

export interface SimFlowControl {
  maxQueued: number;
  maxQueuedPerTenant: number;
  maxWaitMs: number;
  /**
   * A replica is saturated above these (`src/flow/saturation.ts`): llm-d's waiting requests and
   * KV usage, and the router ledger's queued prefill in ms.
   */
  saturation: SaturationLimits;
  /**
   * When a queued request may leave: `room`, whenever some replica has room (the pool is not
   * saturated); `owner`, when in addition the replicas with room cache within `ownerSlackTokens`
   * of its prompt as much as the best replica does, or it has waited `ownerHoldMs`
   * (`src/flow/ownerRelease.ts`); those not ready stay queued while others pass, looking at most
   * `lookAhead` requests deep into each tenant's queue. Default `owner` (`DEFAULT_FLOW_RELEASE`).
   */
  release?: FlowRelease;
  ownerSlackTokens?: number;
  ownerHoldMs?: number;
  lookAhead?: number;
  /**
   * Owner release: inside a tenant, a request that goes warm passes earlier ones that would go
   * cold (ready by their hold only) while they have waited less than this (`mayPassWithin`);
   * 0: never. Default `DEFAULT_FLOW_OWNER_PASS_MS`.
   */
  ownerPassMs?: number;
  /**
   * Owner release: what a dispatched request costs its tenant in the fair share. `prompt`: its
   * prompt tokens; `uncached`: the prompt tokens the warmest replica with room does not cache
   * (`uncachedCharge`). Default `uncached` (`DEFAULT_FLOW_CHARGE`).
   */
  charge?: FlowCharge;
  /**
   * Owner release: a request whose tenant has nothing else queued goes where its prefill ends
   * first rather than wait for its owner (`finishFirstReplica`). Default on.
   */
  sparseFinishFirst?: boolean;
}

export { DEFAULT_FLOW_CHARGE, FLOW_CHARGES, type FlowCharge };
export const DEFAULT_FLOW_SPARSE_FINISH_FIRST = DEFAULT_SPARSE_FINISH_FIRST;

export { FLOW_RELEASES, type FlowRelease };
/**
 * Owner release: in the acceptance experiment it took the light tenant's TTFT p99 from 2.8x its
 * unloaded value (room) to 2.27x, and the fleet's served requests up by 17 %.
 */
export const DEFAULT_FLOW_RELEASE: FlowRelease = 'owner';
/** Owner release's defaults, the gateway's too (`src/flow/ownerRelease.ts`). */
export const DEFAULT_FLOW_OWNER_SLACK_TOKENS = DEFAULT_OWNER_SLACK_TOKENS;
export const DEFAULT_FLOW_OWNER_HOLD_MS = DEFAULT_OWNER_HOLD_MS;
export const DEFAULT_FLOW_LOOK_AHEAD = DEFAULT_LOOK_AHEAD;
export const DEFAULT_FLOW_OWNER_PASS_MS = DEFAULT_OWNER_PASS_MS;

/** A queued arrival's cached prompt tokens per replica in the router's view; null: unknown. */
export type CachedTokensOf<A> = (held: HeldArrival<A>) => ArrayLike<number> | null;

export const DEFAULT_FLOW_MAX_QUEUED = 10_000;
export const DEFAULT_FLOW_MAX_QUEUED_PER_TENANT = 10_000;
export const DEFAULT_FLOW_MAX_WAIT_MS = 30_000;
/**
 * A replica with more modelled prefill queued than this has no room: 0, a replica has room only
 * while no prompt routed there waits for its first token in the router's ledger. In the
 * acceptance experiment (docs/flow-control.md), with room release, 1,000 ms let the light
 * tenant's TTFT p99 reach 7x its unloaded value, 500 ms 3.9x, 0 2.8x; with owner release 500 ms
 * gave 4.5x and 0 2.27x.
 */
export const DEFAULT_FLOW_SATURATION_QUEUE_MS = 0;
/**
 * A replica with more requests waiting than this has no room. llm-d's default is 5
 * (`DEFAULT_SATURATION_LIMITS`); a simulated engine's waiting requests wait for a free sequence
 * slot (max_num_seqs), one slot turnover each, about 400 ms on the seed, so the simulator's
 * default is 0: with 5 the light tenant's TTFT p99 was 10x its unloaded value.
 */
export const DEFAULT_FLOW_SATURATION_WAITING = 0;

export function defaultFlowControl(): SimFlowControl {
  return {
    maxQueued: DEFAULT_FLOW_MAX_QUEUED,
    maxQueuedPerTenant: DEFAULT_FLOW_MAX_QUEUED_PER_TENANT,
    maxWaitMs: DEFAULT_FLOW_MAX_WAIT_MS,
    saturation: {
      ...DEFAULT_SATURATION_LIMITS,
      maxWaitingRequests: DEFAULT_FLOW_SATURATION_WAITING,
      maxQueuedPrefillMs: DEFAULT_FLOW_SATURATION_QUEUE_MS,
    },
    release: DEFAULT_FLOW_RELEASE,
    ownerSlackTokens: DEFAULT_FLOW_OWNER_SLACK_TOKENS,
    ownerHoldMs: DEFAULT_FLOW_OWNER_HOLD_MS,
    lookAhead: DEFAULT_FLOW_LOOK_AHEAD,
    ownerPassMs: DEFAULT_FLOW_OWNER_PASS_MS,
    charge: DEFAULT_FLOW_CHARGE,
    sparseFinishFirst: DEFAULT_FLOW_SPARSE_FINISH_FIRST,
  };
}

/** What the fleet holds for a queued arrival: enough to start it later. */
export interface HeldArrival<A> {
  arrival: A;
  /** The arrival's index in the run. */
  index: number;
  tenant: number;
  /** When the workload scheduled it, if the client's in-flight cap held it back. */
  scheduledMs?: number;
}

export type FlowVerdict = 'dispatch' | 'queued' | 'refused';

interface TenantTally {
  arrivals: number;
  served: number;
  rejected: number;
  expired: number;
  failed: number;
  ttftMs: number[];
  queueWaitMs: number[];
}

/** Salt for the tenant draw, so it is not the workload's own stream of the same seed. */
const TENANT_SEED_SALT = 0x7e4a47e5;

export class SimFlow<A> {
  readonly #tenants: readonly TenantSpec[];
  readonly #cumulative: number[];
  readonly #rng: Rng;
  readonly #queue: FlowQueue<HeldArrival<A>> | null;
  readonly #saturation: SaturationLimits;
  readonly #release: FlowRelease;
  readonly #ownerSlackTokens: number;
  readonly #ownerHoldMs: number;
  readonly #lookAhead: number;
  readonly #ownerPassMs: number;
  readonly #charge: FlowCharge;
  readonly #sparseFinishFirst: boolean;
  /**
   * Set by the readiness test for each request it accepts, by index (one of them is taken): the
   * replica finish-first chose (routed there only), and its charge.
   */
  readonly #chosen = new Map<number, { replica: number | null; charge: number }>();
  readonly #tally: TenantTally[];

  constructor(tenants: readonly TenantSpec[], seed: number, control: SimFlowControl | undefined) {
    if (tenants.length === 0) throw new RangeError('flow: at least one tenant');
    this.#tenants = tenants;
    const total = tenants.reduce((s, t) => s + t.share, 0);
    let acc = 0;
    this.#cumulative = tenants.map((t) => (acc += t.share / total));
    this.#rng = new Rng((seed ^ TENANT_SEED_SALT) >>> 0);
    this.#saturation = control?.saturation ?? {};
    this.#release = control?.release ?? DEFAULT_FLOW_RELEASE;
    this.#ownerSlackTokens = control?.ownerSlackTokens ?? DEFAULT_FLOW_OWNER_SLACK_TOKENS;
    this.#ownerHoldMs = control?.ownerHoldMs ?? DEFAULT_FLOW_OWNER_HOLD_MS;
    this.#lookAhead = control?.lookAhead ?? DEFAULT_FLOW_LOOK_AHEAD;
    this.#ownerPassMs = control?.ownerPassMs ?? DEFAULT_FLOW_OWNER_PASS_MS;
    this.#charge = control?.charge ?? DEFAULT_FLOW_CHARGE;
    this.#sparseFinishFirst = control?.sparseFinishFirst ?? DEFAULT_FLOW_SPARSE_FINISH_FIRST;
    this.#queue =
      control === undefined
        ? null
        : new FlowQueue({
            classes: FLOW_CLASSES.map((c) => ({ ...c })),
            tenantWeights: Object.fromEntries(tenants.map((t) => [t.name, t.weight])),
            maxQueued: control.maxQueued,
            maxQueuedPerTenant: control.maxQueuedPerTenant,
            maxWaitMs: control.maxWaitMs,
          });
    this.#tally = tenants.map(() => ({
      arrivals: 0,
      served: 0,
      rejected: 0,
      expired: 0,
      failed: 0,
      ttftMs: [],
      queueWaitMs: [],
    }));
  }

  get queued(): number {
    return this.#queue?.size ?? 0;
  }

  /** The next arrival's tenant (call once per arrival, in arrival order). */
  drawTenant(): number {
    const u = this.#rng.next();
    const at = this.#cumulative.findIndex((c) => u < c);
    return at < 0 ? this.#tenants.length - 1 : at;
  }

  /** Counts an arrival of `tenant` (every arrival, once, whatever becomes of it). */
  countArrival(tenant: number): void {
    this.#tally[tenant]!.arrivals++;
  }

  /**
   * An admitted arrival: dispatch now, queued (the pool is saturated or others wait), or refused
   * (the queue's bounds, counted as a 429).
   */
  onArrival(
    held: HeldArrival<A>,
    costTokens: number,
    nowMs: number,
    replicas: () => readonly ReplicaLoad[],
    cachedTokens?: CachedTokensOf<A>,
  ): FlowVerdict {
    const queue = this.#queue;
    if (queue === null) return 'dispatch';
    if (queue.size === 0) {
      const loads = replicas();
      if (this.#release === 'owner' && cachedTokens !== undefined) {
        if (this.#ready(held, 0, costTokens, true, loads, cachedTokens)) return 'dispatch';
      } else if (!isPoolSaturated({ replicas: loads }, this.#saturation)) {
        return 'dispatch';
      }
    }
    const tenant = this.#tenants[held.tenant]!;
    const result = queue.enqueue({
      id: String(held.index),
      tenant: tenant.name,
      priorityClass: tenant.priorityClass,
      costTokens,
      arrivedMs: nowMs,
      payload: held,
    });
    if (result.ok) return 'queued';
    this.#tally[held.tenant]!.rejected++;
    return 'refused';
  }

  /**
   * The next queued arrival to dispatch, or undefined when none or the pool is saturated; with
   * owner release, the first one in the queue's fair order that is ready (`ownerReady`).
   */
  takeNext(
    replicas: () => readonly ReplicaLoad[],
    nowMs = 0,
    cachedTokens?: CachedTokensOf<A>,
  ): FlowItem<HeldArrival<A>> | undefined {
    const queue = this.#queue;
    if (queue === null || queue.size === 0) return undefined;
    this.#chosen.clear();
    const loads = replicas();
    if (isPoolSaturated({ replicas: loads }, this.#saturation)) return undefined;
    if (this.#release === 'room' || cachedTokens === undefined) return queue.dequeue();
    const tenantOf = (item: FlowItem<HeldArrival<A>>) => this.#tenants[item.payload.tenant]!.name;
    return queue.dequeue(
      (item) =>
        this.#ready(
          item.payload,
          nowMs - item.arrivedMs,
          item.costTokens,
          queue.sizeOf(tenantOf(item)) === 1,
          loads,
          cachedTokens,
        ),
      this.#lookAhead,
      this.#charge === 'uncached'
        ? (item) => this.#chosen.get(item.payload.index)?.charge ?? item.costTokens
        : undefined,
      this.#ownerPassMs > 0 ? mayPassWithin(nowMs, this.#ownerPassMs) : undefined,
    );
  }

  /**
   * Owner release's readiness of `held` (`sparse`: its tenant has nothing else queued): false,
   * true (ready by its hold only) or 'preferred' (it goes warm, or where it finishes first);
   * when it is ready, `#chosen` says where it goes and what it is charged.
   */
  #ready(
    held: HeldArrival<A>,
    waitedMs: number,
    promptTokens: number,
    sparse: boolean,
    loads: readonly ReplicaLoad[],
    cachedTokens: CachedTokensOf<A>,
  ): ReadyVerdict {
    this.#chosen.delete(held.index);
    const eligible = loads.map((r) => r.eligible);
    const room = loads.map((r) => hasGoodCapacity(r, this.#saturation));
    const cached = cachedTokens(held);
    if (cached === null) return room.some(Boolean);
    const charge = uncachedCharge(cached, room, promptTokens);
    if (this.#sparseFinishFirst && sparse && loads.some((r) => (r.prefillMsPerToken ?? 0) > 0)) {
      const besidesPrefill = { ...this.#saturation, maxQueuedPrefillMs: undefined };
      const at = finishFirstReplica(
        cached,
        promptTokens,
        loads.map((r, i) => ({
          eligible: r.eligible,
          room: room[i]!,
          openBesidesPrefill: hasGoodCapacity(r, besidesPrefill),
          queuedPrefillMs: r.queuedPrefillMs ?? 0,
          prefillMsPerToken: r.prefillMsPerToken ?? 0,
        })),
        this.#ownerSlackTokens,
      );
      if (at >= 0) {
        this.#chosen.set(held.index, { replica: at, charge });
        return 'preferred';
      }
    }
    const verdict = ownerVerdict(cached, eligible, room, waitedMs, {
      slackTokens: this.#ownerSlackTokens,
      holdMs: this.#ownerHoldMs,
    });
    if (verdict) this.#chosen.set(held.index, { replica: null, charge });
    return verdict;
  }

  /**
   * With flow control on, the replicas without room, which the request it lets through is not
   * routed to (as llm-d's scheduler filters run after its flow controller); null when flow
   * control is off or no replica has room (the router then chooses among all).
   */
  withoutRoom(replicas: readonly ReplicaLoad[], held?: HeldArrival<A>): number[] | null {
    if (this.#queue === null) return null;
    const chosen = held === undefined ? undefined : this.#chosen.get(held.index);
    this.#chosen.clear();
    if (chosen !== undefined) {
      if (chosen.replica !== null) {
        const others = replicas.map((_, i) => i).filter((i) => i !== chosen.replica);
        return others.length === replicas.length ? null : others;
      }
    }
    const without: number[] = [];
    replicas.forEach((r, i) => {
      if (!hasGoodCapacity(r, this.#saturation)) without.push(i);
    });
    return without.length === replicas.length ? null : without;
  }

  /** Arrivals whose wait reached the deadline, removed (each ends as 503). */
  takeExpired(nowMs: number): FlowItem<HeldArrival<A>>[] {
    const expired = this.#queue?.expire(nowMs) ?? [];
    for (const item of expired) this.#tally[item.payload.tenant]!.expired++;
    return expired;
  }

  /** What is still queued when the run stops early: removed, each counted as failed. */
  takeLeft(): FlowItem<HeldArrival<A>>[] {
    const left = this.#queue?.expire(Number.POSITIVE_INFINITY) ?? [];
    for (const item of left) this.#tally[item.payload.tenant]!.failed++;
    return left;
  }

  /** When an item queued at `arrivedMs` is due; undefined without a queue. */
  deadlineMs(arrivedMs: number): number | undefined {
    return this.#queue === null ? undefined : arrivedMs + this.#queue.maxWaitMs;
  }

  /** Refused by another admission rule (`--max-queue-ms`, `--max-ttft-ms`): a 429 too. */
  onRefused(tenant: number): void {
    this.#tally[tenant]!.rejected++;
  }

  onServed(tenant: number, measured: boolean, ttftMs: number, queueWaitMs: number): void {
    const t = this.#tally[tenant]!;
    t.served++;
    if (!measured) return;
    t.ttftMs.push(ttftMs);
    t.queueWaitMs.push(queueWaitMs);
  }

  onFailed(tenant: number): void {
    this.#tally[tenant]!.failed++;
  }

  result(): FlowResult {
    const tenants: TenantFlowResult[] = this.#tenants.map((spec, i) => {
      const t = this.#tally[i]!;
      const ttft = summarize(t.ttftMs);
      const wait = summarize(t.queueWaitMs);
      return {
        tenant: spec.name,
        priorityClass: spec.priorityClass,
        weight: spec.weight,
        arrivals: t.arrivals,
        served: t.served,
        rejected: t.rejected,
        expired: t.expired,
        failed: t.failed,
        measured: t.ttftMs.length,
        ttftP50Ms: ttft.p50,
        ttftP99Ms: ttft.p99,
        queueWaitP50Ms: wait.p50,
        queueWaitP99Ms: wait.p99,
      };
    });
    return { flowControl: this.#queue !== null, tenants };
  }
}
