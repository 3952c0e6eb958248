/**
 * The flow-control queue: requests that arrive while every replica of a pool is saturated wait
 * here, and leave in an order that is fair between tenants and strict between priority classes.
 *
 * Order of dispatch:
 * - **Between classes, strict priority**: the class with the highest `priority` number that has
 *   work goes first (two classes of equal priority: the one listed first).
 * - **Inside a class, weighted fair share by tokens** between tenants: start-time fair queueing
 *   (Goyal, Vin and Cheng, "Start-time Fair Queueing", SIGCOMM 1996), with an item's cost in
 *   tokens as its length and the tenant's weight as its rate. Each class keeps a virtual time
 *   `vTime` (the start tag of the item dispatched last); the item at the head of a tenant's
 *   queue carries a start tag
 *
 *     startTag = max(vTime at the moment it became the head, finishTag of the tenant's last dispatch)
 *     finishTag = startTag + costTokens / weight
 *
 *   and dispatch takes the head with the smallest start tag (ties: the earlier enqueued). A
 *   tenant sending long prompts therefore advances its own tags faster and cannot starve one
 *   sending short ones: over any stretch where two tenants i and j both have work queued, their
 *   dispatched tokens satisfy |tokens_i / w_i - tokens_j / w_j| <= maxCost_i / w_i + maxCost_j / w_j.
 *   Tags are given to heads only (not at enqueue), so a removed or expired item leaves no
 *   trace in the tags of those behind it. When a class empties, its virtual time jumps to the
 *   largest finish tag handed out, so a tenant that was just served gets no credit over a new one.
 * - **Inside a tenant, FIFO.**
 *
 * Bounds: at most `maxQueued` items in all, at most `maxQueuedPerTenant` per tenant (all classes
 * together); an item waits at most `maxWaitMs`: `expire(nowMs)` removes and returns those whose
 * deadline `arrivedMs + maxWaitMs` is at or before `nowMs`. `remove(id)` takes out an item whose
 * client left. Pure: no clock (times come in as `nowMs`), no I/O.
 *
 * Peers: llm-d's flow controller (gateway-api-inference-extension `pkg/epp/flowcontrol/`: priority
 * bands, per-flow fairness inside a band, capacity bounds and TTLs) and AIBrix's virtual token
 * counter; this is the same contract with token-weighted start-time fair queueing inside a band.
 */

export interface FlowClass {
  name: string;
  /** Larger is served first. */
  priority: number;
}

export interface FlowQueueOptions {
  classes: FlowClass[];
  /** Weight of each tenant inside its class; a tenant not listed has weight 1. */
  tenantWeights?: Record<string, number>;
  maxQueued: number;
  maxQueuedPerTenant: number;
  maxWaitMs: number;
}

export interface FlowItem<T> {
  id: string;
  tenant: string;
  priorityClass: string;
  costTokens: number;
  arrivedMs: number;
  payload: T;
}

/**
 * A readiness test's verdict on a queued item (`FlowQueue.dequeue`): false, it stays; true, it
 * may leave; 'preferred', it may leave and may pass the items of its tenant ahead of it that are
 * only ready (true), as `mayPass` allows.
 */
export type ReadyVerdict = boolean | 'preferred';

export type EnqueueResult =
  | { ok: true }
  | { ok: false; reason: 'queue-full' | 'tenant-full' | 'unknown-class' };

export interface FlowTenantStats {
  tenant: string;
  queued: number;
  queuedTokens: number;
}

export interface FlowClassStats {
  name: string;
  priority: number;
  queued: number;
  queuedTokens: number;
  /** Tenants with work queued in this class, in the order they first queued. */
  tenants: FlowTenantStats[];
}

export interface FlowQueueStats {
  queued: number;
  queuedTokens: number;
  /** Every class, highest priority first. */
  classes: FlowClassStats[];
}

interface Entry<T> {
  item: FlowItem<T>;
  seq: number;
}

/** One tenant's FIFO inside one class, and its fair-queueing state there. */
interface Lane<T> {
  tenant: string;
  weight: number;
  entries: Entry<T>[];
  queuedTokens: number;
  /** Start tag of entries[0]; meaningful only while entries is not empty. */
  headStartTag: number;
  /** Finish tag of the tenant's last dispatch in this class. */
  lastFinishTag: number;
  /** Entries are in non-decreasing `arrivedMs` (the usual case): the head has the earliest deadline. */
  arrivalsInOrder: boolean;
}

interface ClassState<T> {
  name: string;
  priority: number;
  lanes: Map<string, Lane<T>>;
  queued: number;
  queuedTokens: number;
  vTime: number;
  maxFinishTag: number;
  /** Dropped by `reconfigure` while requests waited in it: takes none, gone once empty. */
  retired: boolean;
}

/** Fair order between two lanes with work: the smaller start tag, then the earlier enqueued head. */
function before<T>(a: Lane<T>, b: Lane<T>): boolean {
  return (
    a.headStartTag < b.headStartTag ||
    (a.headStartTag === b.headStartTag && a.entries[0]!.seq < b.entries[0]!.seq)
  );
}

export class FlowQueue<T> {
  #classes: ClassState<T>[] = [];
  readonly #classByName = new Map<string, ClassState<T>>();
  #weights: Record<string, number> = {};
  #maxQueued = 0;
  #maxQueuedPerTenant = 0;
  #maxWaitMs = 0;
  /** Where each queued item sits, by id. */
  readonly #where = new Map<string, { cls: ClassState<T>; lane: Lane<T> }>();
  readonly #perTenant = new Map<string, number>();
  #size = 0;
  #seq = 0;

  constructor(opts: FlowQueueOptions) {
    this.reconfigure(opts);
  }

  /**
   * New settings for a queue that may hold requests (a config reload). Weights apply to the
   * tags handed out from now on; bounds to later arrivals (those waiting stay, even past a
   * lower bound); the deadline to every waiting request (`arrivedMs + maxWaitMs`). A class
   * keeps its waiting requests and tags and takes its new priority; a class dropped while
   * requests wait in it keeps them, in its old place, until it empties, and takes no more
   * (`unknown-class`). Throws, changing nothing, on settings the constructor refuses.
   */
  reconfigure(opts: FlowQueueOptions): void {
    if (opts.classes.length === 0) throw new RangeError('flow queue: at least one class');
    for (const [key, value] of [
      ['maxQueued', opts.maxQueued],
      ['maxQueuedPerTenant', opts.maxQueuedPerTenant],
      ['maxWaitMs', opts.maxWaitMs],
    ] as const) {
      if (!(value >= 0)) throw new RangeError(`flow queue: ${key} must be >= 0, got ${value}`);
    }
    const weights = opts.tenantWeights ?? {};
    for (const [tenant, w] of Object.entries(weights)) {
      if (!(w > 0 && Number.isFinite(w))) {
        throw new RangeError(`flow queue: weight of tenant ${tenant} must be > 0, got ${w}`);
      }
    }
    const names = new Set<string>();
    for (const c of opts.classes) {
      if (names.has(c.name)) throw new RangeError(`flow queue: class ${c.name} listed twice`);
      names.add(c.name);
    }
    this.#weights = { ...weights };
    this.#maxQueued = opts.maxQueued;
    this.#maxQueuedPerTenant = opts.maxQueuedPerTenant;
    this.#maxWaitMs = opts.maxWaitMs;
    const listed = opts.classes.map((c, index) => {
      const cls = this.#classByName.get(c.name) ?? {
        name: c.name,
        priority: c.priority,
        lanes: new Map<string, Lane<T>>(),
        queued: 0,
        queuedTokens: 0,
        vTime: 0,
        maxFinishTag: 0,
        retired: false,
      };
      cls.priority = c.priority;
      cls.retired = false;
      return { cls, index };
    });
    listed.sort((a, b) => b.cls.priority - a.cls.priority || a.index - b.index);
    const kept = this.#classes.filter((c) => !names.has(c.name) && c.queued > 0);
    for (const c of kept) c.retired = true;
    // Retired classes keep their priority; among equals, the listed ones first.
    this.#classes = [...listed.map((l) => l.cls), ...kept];
    this.#classes.sort((a, b) => b.priority - a.priority);
    this.#classByName.clear();
    for (const c of this.#classes) {
      this.#classByName.set(c.name, c);
      for (const lane of c.lanes.values()) lane.weight = this.weightOf(lane.tenant);
    }
  }

  get size(): number {
    return this.#size;
  }

  get maxWaitMs(): number {
    return this.#maxWaitMs;
  }

  sizeOf(tenant: string): number {
    return this.#perTenant.get(tenant) ?? 0;
  }

  has(id: string): boolean {
    return this.#where.has(id);
  }

  weightOf(tenant: string): number {
    return this.#weights[tenant] ?? 1;
  }

  enqueue(item: FlowItem<T>): EnqueueResult {
    const cls = this.#classByName.get(item.priorityClass);
    if (cls === undefined || cls.retired) return { ok: false, reason: 'unknown-class' };
    if (this.#where.has(item.id)) throw new Error(`flow queue: id ${item.id} is already queued`);
    if (!(item.costTokens >= 0 && Number.isFinite(item.costTokens))) {
      throw new RangeError(`flow queue: costTokens must be >= 0, got ${item.costTokens}`);
    }
    if (this.#size >= this.#maxQueued) return { ok: false, reason: 'queue-full' };
    if (this.sizeOf(item.tenant) >= this.#maxQueuedPerTenant) {
      return { ok: false, reason: 'tenant-full' };
    }
    let lane = cls.lanes.get(item.tenant);
    if (lane === undefined) {
      lane = {
        tenant: item.tenant,
        weight: this.weightOf(item.tenant),
        entries: [],
        queuedTokens: 0,
        headStartTag: 0,
        lastFinishTag: 0,
        arrivalsInOrder: true,
      };
      cls.lanes.set(item.tenant, lane);
    }
    const last = lane.entries[lane.entries.length - 1];
    if (last === undefined) lane.arrivalsInOrder = true;
    else if (item.arrivedMs < last.item.arrivedMs) lane.arrivalsInOrder = false;
    lane.entries.push({ item, seq: this.#seq++ });
    lane.queuedTokens += item.costTokens;
    if (lane.entries.length === 1) lane.headStartTag = Math.max(cls.vTime, lane.lastFinishTag);
    cls.queued++;
    cls.queuedTokens += item.costTokens;
    this.#where.set(item.id, { cls, lane });
    this.#perTenant.set(item.tenant, this.sizeOf(item.tenant) + 1);
    this.#size++;
    return { ok: true };
  }

  /**
   * The next item to dispatch, removed; undefined when none is. Without `ready`, the header's
   * order: the highest-priority class with work, inside it the head with the smallest start tag
   * (ties: the earlier enqueued).
   *
   * With `ready`, the first item that `ready` accepts, looking at most `lookAhead` items deep
   * into each tenant's queue (default 1: heads only). Only the highest-priority class with work
   * is looked at (strict priority holds: nothing of a lower class passes it). Inside it the
   * tenants are tried in the same order (smallest start tag first), and the item taken is
   * charged to its tenant's tags exactly as a head would be (`finishTag = startTag + costTokens
   * / weight`), so the fair share by tokens holds over what is taken; inside a tenant a later
   * item may pass an earlier one that is not ready. A `ready` that accepts everything gives the
   * order without it.
   *
   * `charge`, when given, is what the item taken costs its tenant's tags instead of its
   * `costTokens` (> 0; read once, for the item taken): the caller's price at dispatch, such as
   * the prompt tokens no replica with room caches. The fair share then holds over the charges.
   *
   * Inside the tenant chosen, the first item `ready` calls 'preferred' goes before the ones it
   * calls only ready (true) ahead of it when `mayPass` allows each of those to be passed (its
   * FIFO bound, such as how long it has waited); otherwise the first ready one goes. Without
   * `mayPass`, the first item accepted either way goes. Which tenant goes is the same either way, so the fair share holds.
   */
  dequeue(
    ready?: (item: FlowItem<T>) => ReadyVerdict,
    lookAhead = 1,
    charge?: (item: FlowItem<T>) => number,
    mayPass?: (item: FlowItem<T>) => boolean,
  ): FlowItem<T> | undefined {
    const depth = Math.max(1, Math.floor(lookAhead));
    for (const cls of this.#classes) {
      if (cls.queued === 0) continue;
      const lanes = [...cls.lanes.values()].filter((l) => l.entries.length > 0);
      if (ready === undefined)
        return this.#take(
          cls,
          lanes.reduce((a, b) => (before(b, a) ? b : a)),
          0,
          charge,
        );
      lanes.sort((a, b) => (before(a, b) ? -1 : 1));
      for (const lane of lanes) {
        const n = Math.min(depth, lane.entries.length);
        let first = -1;
        for (let at = 0; at < n; at++) {
          const item = lane.entries[at]!.item;
          const verdict = ready(item);
          if (verdict === 'preferred') return this.#take(cls, lane, at, charge);
          if (verdict) {
            if (first < 0) first = at;
            // A ready item that may not be passed ends the search: the first ready one goes.
            if (mayPass === undefined || !mayPass(item)) break;
          }
        }
        if (first >= 0) return this.#take(cls, lane, first, charge);
      }
      return undefined;
    }
    return undefined;
  }

  /** Removes entry `at` of `lane`, charging it to the lane's tags as a dispatch. */
  #take(
    cls: ClassState<T>,
    lane: Lane<T>,
    at: number,
    charge?: (item: FlowItem<T>) => number,
  ): FlowItem<T> {
    const [entry] = lane.entries.splice(at, 1) as [Entry<T>];
    const startTag = lane.headStartTag;
    const finishTag = startTag + (charge?.(entry.item) ?? entry.item.costTokens) / lane.weight;
    cls.vTime = startTag;
    lane.lastFinishTag = finishTag;
    cls.maxFinishTag = Math.max(cls.maxFinishTag, finishTag);
    this.#forget(cls, lane, entry.item);
    if (lane.entries.length > 0) lane.headStartTag = Math.max(cls.vTime, lane.lastFinishTag);
    if (cls.queued === 0) this.#settle(cls);
    return entry.item;
  }

  /** Takes out a queued item (its client left); undefined when no such item is queued. */
  remove(id: string): FlowItem<T> | undefined {
    const where = this.#where.get(id);
    if (where === undefined) return undefined;
    const { cls, lane } = where;
    const at = lane.entries.findIndex((e) => e.item.id === id);
    if (at < 0) return undefined;
    const [entry] = lane.entries.splice(at, 1) as [Entry<T>];
    this.#forget(cls, lane, entry.item);
    if (at === 0 && lane.entries.length > 0) {
      lane.headStartTag = Math.max(cls.vTime, lane.lastFinishTag);
    }
    if (cls.queued === 0) this.#settle(cls);
    return entry.item;
  }

  /** Removes and returns every item whose deadline (`arrivedMs + maxWaitMs`) is at or before `nowMs`. */
  expire(nowMs: number): FlowItem<T>[] {
    const expired: FlowItem<T>[] = [];
    const due = (e: Entry<T>) => e.item.arrivedMs + this.#maxWaitMs <= nowMs;
    for (const cls of this.#classes) {
      for (const lane of cls.lanes.values()) {
        const head = lane.entries[0];
        if (head === undefined) continue;
        if (lane.arrivalsInOrder && !due(head)) continue;
        const kept: Entry<T>[] = [];
        const gone: Entry<T>[] = [];
        for (const entry of lane.entries) (due(entry) ? gone : kept).push(entry);
        if (gone.length === 0) continue;
        const headLeft = kept[0] !== head;
        lane.entries = kept;
        for (const entry of gone) {
          expired.push(entry.item);
          this.#forget(cls, lane, entry.item);
        }
        if (headLeft && kept.length > 0) {
          lane.headStartTag = Math.max(cls.vTime, lane.lastFinishTag);
        }
      }
      if (cls.queued === 0) this.#settle(cls);
    }
    return expired;
  }

  /** The earliest deadline of a queued item, or undefined when the queue is empty. */
  nextDeadlineMs(): number | undefined {
    let earliest: number | undefined;
    for (const cls of this.#classes) {
      for (const lane of cls.lanes.values()) {
        const entries = lane.arrivalsInOrder ? lane.entries.slice(0, 1) : lane.entries;
        for (const entry of entries) {
          const deadline = entry.item.arrivedMs + this.#maxWaitMs;
          if (earliest === undefined || deadline < earliest) earliest = deadline;
        }
      }
    }
    return earliest;
  }

  stats(): FlowQueueStats {
    let queued = 0;
    let queuedTokens = 0;
    const classes = this.#classes.map((cls) => {
      queued += cls.queued;
      queuedTokens += cls.queuedTokens;
      const tenants: FlowTenantStats[] = [];
      for (const lane of cls.lanes.values()) {
        if (lane.entries.length === 0) continue;
        tenants.push({
          tenant: lane.tenant,
          queued: lane.entries.length,
          queuedTokens: lane.queuedTokens,
        });
      }
      return {
        name: cls.name,
        priority: cls.priority,
        queued: cls.queued,
        queuedTokens: cls.queuedTokens,
        tenants,
      };
    });
    return { queued, queuedTokens, classes };
  }

  /**
   * A class that just emptied: its virtual time moves to the largest finish tag handed out (no
   * tenant keeps credit or debt across an idle period), and its idle lanes are dropped.
   */
  #settle(cls: ClassState<T>): void {
    cls.vTime = Math.max(cls.vTime, cls.maxFinishTag);
    cls.lanes.clear();
    if (cls.retired) {
      this.#classes = this.#classes.filter((c) => c !== cls);
      this.#classByName.delete(cls.name);
    }
  }

  #forget(cls: ClassState<T>, lane: Lane<T>, item: FlowItem<T>): void {
    lane.queuedTokens -= item.costTokens;
    cls.queued--;
    cls.queuedTokens -= item.costTokens;
    this.#where.delete(item.id);
    const left = this.sizeOf(item.tenant) - 1;
    if (left === 0) this.#perTenant.delete(item.tenant);
    else this.#perTenant.set(item.tenant, left);
    this.#size--;
  }
}
