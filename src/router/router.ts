/**
 * The router facade that the fleet simulator and the live gateway both drive. Synchronous and
 * clock-free: every call that depends on time takes `nowMs`. One route:
 *   1. guards (filters.ts) split replicas into eligible / filtered / down;
 *   2. one walk over the request's block keys gives every healthy replica's cached prefix
 *      (prefix index plus predict-on-route overlay);
 *   3. the policy picks among eligible replicas (fail open to the least loaded healthy one when
 *      none is eligible; no healthy replica at all is ERR_NO_HEALTHY_REPLICA); for a request with
 *      a LoRA adapter and a LoRA-aware policy, among those with a free adapter slot while any
 *      has one;
 *   4. the router applies the choice: ledger, approximate record, overlay, policy hooks, counters.
 */
import type { BlockKey } from '../kv/blockKey.ts';
import type { KvEvent } from '../kv/events.ts';
import { grown } from '../util/grown.ts';
import type { ApproxForgetting } from './index/approxForgetting.ts';
import { Rng } from '../util/rng.ts';
import {
  AdapterTracker,
  hasLoraSlot,
  type LoraView,
  NO_LORA,
  type ReplicaLoraReport,
} from './adapters.ts';
import {
  DEFAULT_KV_THRESHOLD,
  DEFAULT_OVERLAY_TTL_MS,
  DEFAULT_POLICY,
  DEFAULT_SEED,
  DEFAULT_STALE_MS,
  type IndexMode,
} from './defaults.ts';
import { ApproxFallback } from './audit/fallback.ts';
import { RouterError } from './errors.ts';
import { type FilterThresholds, leastLoaded, type Verdict } from './filters.ts';
import { ForeignKeyMap, type ForeignKvEvent } from './index/foreignKeys.ts';
import { Ledger } from './ledger.ts';
import { RouteOverlay } from './index/overlay.ts';
import {
  idleReplicaView,
  type MutableReplicaView,
  type Pick,
  type PickInput,
  type Policy,
  type ReplicaView,
  type RouteRequest,
} from './policy.ts';
import { CostPolicy } from './policies/cost.ts';
import type { PrefixIndex } from './index/prefixIndex.ts';
import { makePrefixIndex } from './index/makePrefixIndex.ts';
import { matchPrefix } from './index/prefixMatch.ts';
import { extendThroughTier } from './index/tierMatch.ts';
import { makePolicy, type PolicyOptions } from './registry.ts';
import { ReplicaGauges } from './replicaGauges.ts';
import type { ReplicaSpeed } from './replicaSpeed.ts';
import { SessionMap, type SessionMapOptions } from './sessionMap.ts';
import { SlotCache, type SlotCacheOptions } from './index/slotCache.ts';
import type { ReplicaSnapshot, RouterCounters, RouterSnapshot } from './snapshot.ts';

export interface RouterOptions {
  /** Replica names; a replica's id is its position (later additions append). */
  replicas: readonly string[];
  /**
   * Each replica's speed (aligned with `replicas`), for a fleet of mixed hardware; absent: every
   * policy uses its fleet-wide figures (replicaSpeed.ts).
   */
  speeds?: readonly (ReplicaSpeed | undefined)[];
  /** Registry name or a ready policy; default DEFAULT_POLICY ('delay-cost'). */
  policy?: string | Policy;
  policyOptions?: PolicyOptions;
  /** 'events' (exact, fed by KV events; default) or 'approx' (what the router sent where). */
  indexMode?: IndexMode;
  kvThreshold?: number;
  staleMs?: number;
  /** Predict-on-route lifetime; 0 disables the overlay. Events mode only. */
  overlayTtlMs?: number;
  /** Approx mode: blocks remembered per replica. */
  approxCapacityBlocks?: number;
  /**
   * Approx mode: how the record forgets, a peer router's way (approxForgetting.ts); brings its
   * own capacity. Default: LRU at `approxCapacityBlocks` at every route.
   */
  approxForgetting?: ApproxForgetting;
  /**
   * Approx mode: each replica's KV tiers (aligned with `replicas`): its GPU pool and CPU tier in
   * blocks, modelled by the approximate index (approxIndex.ts). The events index learns both
   * from the events and ignores this.
   */
  approxTiers?: readonly (ApproxTiers | undefined)[];
  /** Pre-size the prefix index for this many distinct block keys. */
  expectedKeys?: number;
  seed?: number;
  /** Put per-replica policy scores into every decision (costs an object per route). */
  explain?: boolean;
  /** Session affinity for requests that carry a `session` key (absent: keys are ignored). */
  sessions?: SessionAffinityOptions;
}

/**
 * Session affinity: a request with a session key goes back to the replica its session used last
 * while that replica is eligible and its cost is within `slackTokens` of the best candidate's,
 *
 *   cost(r) [tokens] = queued prompt tokens on r (ledger) + prompt tokens not cached on r,
 *
 * the router seed's rule (policies/cost.ts) whatever the policy. Meant for engines whose cache the
 * router cannot see (the openai dialect): there uncached(r) is the whole prompt everywhere and the
 * rule compares queues alone, so the slack is how much more queued prefill a conversation accepts
 * to keep its cache.
 */
export interface SessionAffinityOptions extends SessionMapOptions {
  /** How much costlier (tokens) than the best the session's replica may be and still be kept. */
  slackTokens: number;
}

/** What affinity did for a request with a session key. */
export type AffinityOutcome = 'kept' | 'left' | 'new';

/** A replica's KV tiers as the approximate index models them, in blocks. */
export interface ApproxTiers {
  /** Its GPU pool (default: approxCapacityBlocks). */
  kvBlocks?: number;
  /** Its CPU tier (absent or 0: none). */
  cpuKvBlocks?: number;
}

/** A replica's last engine report (Prometheus gauges or an in-process engine). */
export interface ReplicaReport {
  kvUsage: number;
  running: number;
  waiting: number;
  queuedPromptTokens?: number;
  /** LoRA adapters running and waiting and max_loras (vLLM's `vllm:lora_requests_info`). */
  loras?: ReplicaLoraReport;
}

export interface RouteDecision {
  requestId: string;
  replica: string;
  replicaId: number;
  policy: string;
  /** Prompt tokens cached on the chosen replica (its longest cached prefix). */
  cachedTokens: number;
  /** promptTokens - cachedTokens: what the ledger now counts as queued there. */
  uncachedTokens: number;
  /** The ledger's queued prompt tokens on the chosen replica before this request. */
  queuedAheadTokens: number;
  /** Most prompt tokens cached on any replica that was considered. */
  bestCachedTokens: number;
  /** The chosen replica caches less of the prompt than the best-cached one. */
  spilled: boolean;
  /** No replica passed the guards; the least loaded healthy one was taken. */
  failedOpen: boolean;
  /** Policy scores by replica name, when `explain` is on and the policy gives them. */
  scores?: Record<string, number>;
  /**
   * A request with a session key under session affinity: 'kept' on its session's replica, 'left'
   * it (not eligible, or costlier than the slack allows), or 'new' (no replica remembered).
   */
  affinity?: AffinityOutcome;
}

/** A peer router's assignment, as `applyPeerRoute` takes it. */
export interface PeerRoute {
  /** The peer's id: request ids are unique per peer only. */
  peer: string;
  requestId: string;
  replica: string;
  promptTokens: number;
  /** Prompt tokens not cached on the replica when the peer routed there (queued). */
  uncachedTokens: number;
  blockSize: number;
  /** The predicted prefix: block keys from `fromBlock` on (absent: no prediction). */
  blockKeys?: readonly BlockKey[];
  /** Position of blockKeys[0] in the request (blocks already cached there). */
  fromBlock?: number;
  lora?: string;
  /** Already past its first token (a snapshot's entry). */
  decoding?: boolean;
}

/** One ledger entry as a snapshot carries it: peer null is the router's own. */
export interface InFlightRecord extends Omit<PeerRoute, 'peer' | 'blockKeys' | 'fromBlock'> {
  peer: string | null;
  decoding: boolean;
}

interface ReplicaState {
  readonly id: number;
  readonly name: string;
  healthy: boolean;
  removed: boolean;
  report: ReplicaReport | undefined;
  reportedAtMs: number | undefined;
  lastEventAtMs: number | undefined;
  foreign: ForeignKeyMap | undefined;
  speed: ReplicaSpeed | undefined;
  /** What the policy sees of this replica, refilled by each route (see `#view`). */
  readonly view: MutableReplicaView;
}

export class Router {
  readonly policy: Policy;
  readonly indexMode: IndexMode;
  readonly thresholds: Readonly<FilterThresholds>;
  readonly explain: boolean;
  #replicas: ReplicaState[] = [];
  #byName = new Map<string, number>();
  /** Session affinity's map, or null when off. */
  readonly #sessions: SessionMap | null;
  readonly #sessionSlackTokens: number;
  #fleet: readonly (string | null)[] = [];
  #fleetVersion = 0;
  #index: PrefixIndex;
  #overlay: RouteOverlay | null;
  #ledger = new Ledger();
  #adapters = new AdapterTracker();
  /** Replicas whose events are not trusted (the audit's repair): routed on their own record. */
  #fallback = new Map<number, ApproxFallback>();
  /** Replicas whose cache is a set of slots (llama.cpp): hits predicted by their slot model. */
  #slotCaches = new Map<number, SlotCache>();
  #rng: Rng;
  #matched = new Int32Array(0);
  /** The guards' inputs per replica, side by side (see ReplicaGauges). */
  #gauges = new ReplicaGauges();
  /** The policy, when it is `cost` reading the ledger's queues (CostPolicy.pickFromArrays). */
  readonly #arrayPolicy: CostPolicy | null;
  /** Route scratch: the eligible replicas' ids, in the order of `#eligible`. */
  #eligibleIds = new Int32Array(0);
  /**
   * Per replica: the number of the last route that offered it to the policy, so that a pick is
   * checked against the candidates without a pass over them.
   */
  #offeredIn = new Float64Array(0);
  #routes = 0;
  /** Route scratch: healthy and eligible replicas, the walk's bitset of replicas still matching. */
  #healthy: ReplicaState[] = [];
  #eligible: ReplicaState[] = [];
  #alive = new Int32Array(0);
  /** The candidates' views handed to the policy (the array and the views are reused). */
  #views: ReplicaView[] = [];
  /** Per replica: blocks of the last walk's match that only its CPU tier holds. */
  #cpuMatched = new Int32Array(0);
  #cpuDirty = false;
  #counters: Omit<RouterCounters, 'policy'> = {
    decisions: 0,
    cachedTokens: 0,
    uncachedTokens: 0,
    spills: 0,
    failOpens: 0,
    noHealthyReplica: 0,
    eventBatches: 0,
    blocksChanged: 0,
  };

  constructor(options: RouterOptions) {
    const policy = options.policy ?? DEFAULT_POLICY;
    this.policy = typeof policy === 'string' ? makePolicy(policy, options.policyOptions) : policy;
    this.indexMode = options.indexMode ?? 'events';
    // A peer's policy brings its project's filters, not kvroute's guards (Policy.ownFilters).
    this.thresholds = this.policy.ownFilters
      ? { kvThreshold: Number.POSITIVE_INFINITY, staleMs: Number.POSITIVE_INFINITY }
      : {
          kvThreshold: options.kvThreshold ?? DEFAULT_KV_THRESHOLD,
          staleMs: options.staleMs ?? DEFAULT_STALE_MS,
        };
    this.explain = options.explain ?? false;
    const sessions = options.sessions;
    if (sessions !== undefined && !(sessions.slackTokens >= 0)) {
      throw new RouterError(
        'ERR_INVALID_OPTION',
        `session slackTokens must be >= 0, got ${sessions.slackTokens}`,
      );
    }
    this.#sessions = sessions === undefined ? null : new SessionMap(sessions);
    this.#sessionSlackTokens = sessions?.slackTokens ?? 0;
    this.#arrayPolicy =
      this.policy instanceof CostPolicy && this.policy.readsArrays ? this.policy : null;
    this.#rng = Rng.derive(options.seed ?? DEFAULT_SEED, 'router');
    this.#index = makePrefixIndex(this.indexMode, options.replicas.length, {
      capacityBlocks: options.approxCapacityBlocks,
      expectedKeys: options.expectedKeys,
      ...(options.approxForgetting && { forgetting: options.approxForgetting }),
    });
    const ttlMs = options.overlayTtlMs ?? DEFAULT_OVERLAY_TTL_MS;
    this.#overlay = this.indexMode === 'events' && ttlMs > 0 ? new RouteOverlay(ttlMs) : null;
    options.replicas.forEach((name, i) => {
      this.addReplica(name, options.speeds?.[i], options.approxTiers?.[i]);
    });
  }

  get policyName(): string {
    return this.policy.name;
  }

  /** Names of the replicas currently in the fleet. */
  get replicaNames(): string[] {
    return this.#replicas.filter((r) => !r.removed).map((r) => r.name);
  }

  /**
   * Adds a replica (healthy, cold), of `speed` when the fleet is mixed, with the KV tiers the
   * approximate index is to model; returns its id.
   */
  addReplica(name: string, speed?: ReplicaSpeed, tiers?: ApproxTiers): number {
    if (this.#byName.has(name)) {
      throw new RouterError('ERR_DUPLICATE_REPLICA', `replica '${name}' is already in the fleet`);
    }
    const id = this.#replicas.length;
    this.#replicas.push({
      id,
      name,
      healthy: true,
      removed: false,
      report: undefined,
      reportedAtMs: undefined,
      lastEventAtMs: undefined,
      foreign: undefined,
      speed,
      view: idleReplicaView(id, name),
    });
    this.#byName.set(name, id);
    this.#index.ensureReplicas(id + 1);
    this.#ledger.ensureReplicas(id + 1);
    this.#adapters.ensureReplicas(id + 1);
    this.#matched = new Int32Array(id + 1);
    this.#eligibleIds = new Int32Array(id + 1);
    this.#gauges.ensureReplicas(id + 1);
    this.#offeredIn = grown(this.#offeredIn, new Float64Array(id + 1));
    this.#cpuMatched = new Int32Array(id + 1);
    if (tiers) this.setApproxTiers(name, tiers);
    this.#fleetChanged();
    return id;
  }

  /**
   * Tells the approximate index `replica`'s tiers, in blocks: its GPU pool, and its CPU tier
   * (0: none), where blocks it ages out of the GPU record stay credited as CPU hits until that
   * tier is full. No effect in events mode, where the events say what each tier holds.
   */
  setApproxTiers(replica: string, tiers: ApproxTiers): void {
    const state = this.#state(replica);
    if (this.indexMode !== 'approx') return;
    if (tiers.kvBlocks !== undefined) this.#index.setGpuCapacity?.(state.id, tiers.kvBlocks);
    if (tiers.cpuKvBlocks !== undefined) this.#index.setCpuCapacity?.(state.id, tiers.cpuKvBlocks);
  }

  /** Removes a replica: its index entries go; its in-flight requests can still finish. */
  removeReplica(name: string): void {
    const state = this.#state(name);
    state.removed = true;
    state.healthy = false;
    this.#gauges.down[state.id] = 1;
    this.#byName.delete(name);
    this.#forget(state);
    this.#fleetChanged();
  }

  /**
   * Picks a replica for `request` and records the assignment. Throws RouterError
   * ERR_NO_HEALTHY_REPLICA only when no replica is healthy. An id already in flight (a retry)
   * has its earlier assignment released first.
   */
  route(request: RouteRequest, nowMs: number): RouteDecision {
    this.#overlay?.expire(nowMs);
    this.#index.forget?.(nowMs);
    const eligibleCount = this.#sortReplicas(request.avoid, nowMs);
    const healthy = this.#healthy;
    const eligible = this.#eligible;
    const matched = this.#matchBlocks(request, nowMs);

    const failedOpen = eligibleCount === 0;
    const lora = request.lora || null;
    const loraViews = lora === null ? null : new Map<number, LoraView>();
    let candidates = eligible;
    if (lora !== null) {
      for (const s of eligible) {
        loraViews!.set(s.id, this.#adapters.view(s.id, lora, s.report?.loras));
      }
      if (this.policy.loraAware) {
        // Replicas without a free adapter slot are skipped while another has one (fail open).
        const withSlot = eligible.filter((s) => hasLoraSlot(loraViews!.get(s.id)!));
        if (withSlot.length > 0) candidates = withSlot;
      }
    }
    const considered = failedOpen ? healthy : candidates;
    // The longest match among the replicas considered (matched[] of the others is stale).
    let bestBlocks = 0;
    for (let i = 0; i < considered.length; i++) {
      const blocks = matched[considered[i]!.id]!;
      if (blocks > bestBlocks) bestBlocks = blocks;
    }
    let pick: Pick;
    if (failedOpen) {
      pick = this.#pickLeastLoaded(considered, matched, request);
    } else if (lora === null && !this.#cpuDirty && this.#arrayPolicy !== null) {
      // The default policy, with nothing a view adds: scored from arrays by replica id.
      pick = this.#arrayPolicy.pickFromArrays(
        this.#eligibleIds,
        eligibleCount,
        this.#ledger.queuedPromptTokens,
        matched,
        request,
        this.#rng,
      );
    } else {
      pick = this.#pickByPolicy(request, nowMs, candidates, matched, loraViews);
    }

    let affinity: AffinityOutcome | undefined;
    if (this.#sessions !== null && request.session !== undefined) {
      const held = this.#sessions.replicaOf(request.session);
      const heldId = held === undefined ? undefined : this.#byName.get(held);
      const kept =
        heldId !== undefined && !failedOpen
          ? this.#withinSlack(heldId, considered, matched, request)
          : false;
      affinity = held === undefined ? 'new' : kept ? 'kept' : 'left';
      if (kept) pick = { replicaId: heldId!, ...(pick.scores && { scores: pick.scores }) };
    }
    const chosen = this.#replicas[pick.replicaId]!;
    if (affinity !== undefined) this.#sessions!.record(request.session!, chosen.name);
    const decision = this.#assign(
      request,
      chosen,
      matched[chosen.id]!,
      bestBlocks,
      failedOpen,
      nowMs,
    );
    if (affinity !== undefined) decision.affinity = affinity;
    if (this.explain && pick.scores) {
      const scores: Record<string, number> = {};
      considered.forEach((s, i) => {
        const score = pick.scores?.[i];
        if (score !== undefined) scores[s.name] = score;
      });
      decision.scores = scores;
    }
    return decision;
  }

  /**
   * Fills the route scratch: `#healthy` (not down, not avoided), `#eligible` and `#eligibleIds`
   * (under the thresholds) and `#alive` (the healthy ids' bits). Returns the eligible count;
   * throws ERR_NO_HEALTHY_REPLICA when none is healthy.
   */
  #sortReplicas(avoid: readonly string[] | undefined, nowMs: number): number {
    // Scratch reused across routes: no route keeps these arrays (views copy what they need).
    const healthy = this.#healthy;
    const eligible = this.#eligible;
    let healthyCount = 0;
    let eligibleCount = 0;
    const words = this.#index.blocks.words;
    if (this.#alive.length !== words) this.#alive = new Int32Array(words);
    const alive = this.#alive;
    alive.fill(0);
    const replicas = this.#replicas;
    const gauges = this.#gauges;
    const eligibleIds = this.#eligibleIds;
    // By id, from the gauges: a replica's state object is read only where a name is avoided.
    for (let id = 0; id < replicas.length; id++) {
      const verdict = gauges.verdict(id, nowMs, this.thresholds);
      if (verdict === 'down' || avoid?.includes(replicas[id]!.name)) continue;
      healthy[healthyCount++] = replicas[id]!;
      alive[id >>> 5] = alive[id >>> 5]! | (1 << (id & 31));
      if (verdict === 'eligible') {
        eligibleIds[eligibleCount] = id;
        eligible[eligibleCount++] = replicas[id]!;
      }
    }
    // Overwritten in place and cut to this route's count: a length set to 0 drops an array's
    // storage in V8, and every route grew it again, push by push. A length set is a call out
    // of compiled code even when it changes nothing, so it is made only when it does.
    if (healthy.length !== healthyCount) healthy.length = healthyCount;
    if (eligible.length !== eligibleCount) eligible.length = eligibleCount;
    if (healthy.length === 0) {
      this.#counters.noHealthyReplica++;
      throw new RouterError('ERR_NO_HEALTHY_REPLICA', 'no healthy replica to route to');
    }
    return eligibleCount;
  }

  /** Blocks of the prompt each healthy replica holds, by replica id: GPU, then the CPU tier, then slot caches. */
  #matchBlocks(request: RouteRequest, nowMs: number): Int32Array {
    const matched = this.#matched;
    matchPrefix(this.#index.blocks, this.#overlay, request.blockKeys, this.#alive, nowMs, matched);
    const cpu = this.#index.cpuBlocks;
    if (cpu !== undefined && cpu.size > 0) {
      const ids = this.#healthy.map((s) => s.id);
      extendThroughTier(this.#index.blocks, cpu, request.blockKeys, ids, matched, this.#cpuMatched);
      this.#cpuDirty = true;
    } else if (this.#cpuDirty) {
      this.#cpuMatched.fill(0);
      this.#cpuDirty = false;
    }
    for (const [id, slots] of this.#slotCaches) {
      matched[id] = slots.predict(request.blockKeys, request.promptTokens, request.blockSize);
    }
    return matched;
  }

  /**
   * Fail open (no replica under the thresholds): least loaded counting the prefill this request
   * would add there, so a fleet that is all over the KV threshold at saturation still keeps
   * prompts on their warm replicas.
   */
  #pickLeastLoaded(
    considered: readonly ReplicaState[],
    matched: Int32Array,
    request: RouteRequest,
  ): Pick {
    const loads = considered.map((s) => this.#ledger.load(s.id));
    const at = leastLoaded(
      loads.map(
        (l, i) =>
          l.queuedPromptTokens +
          request.promptTokens -
          cachedOf(matched[considered[i]!.id]!, request),
      ),
      loads.map((l) => l.prefillRequests + l.decodeRequests),
      this.#rng,
    );
    return { replicaId: considered[at]!.id };
  }

  /** The policy's pick from a view per candidate; a pick outside them is ERR_INVALID_OPTION. */
  #pickByPolicy(
    request: RouteRequest,
    nowMs: number,
    candidates: readonly ReplicaState[],
    matched: Int32Array,
    loraViews: Map<number, LoraView> | null,
  ): Pick {
    const views = this.#views;
    const route = ++this.#routes;
    const offeredIn = this.#offeredIn;
    for (let i = 0; i < candidates.length; i++) {
      const s = candidates[i]!;
      offeredIn[s.id] = route;
      views[i] = this.#view(s, request, matched[s.id]!, loraViews?.get(s.id) ?? NO_LORA);
    }
    if (views.length !== candidates.length) views.length = candidates.length;
    const pick = this.policy.pick(this.#pickInput(request, nowMs, views));
    if (offeredIn[pick.replicaId] !== route) {
      throw new RouterError(
        'ERR_INVALID_OPTION',
        `policy '${this.policy.name}' picked replica ${pick.replicaId}, which is not eligible`,
      );
    }
    return pick;
  }

  /** Records the assignment (ledger, index, counters) and says what it was. */
  #assign(
    request: RouteRequest,
    chosen: ReplicaState,
    chosenBlocks: number,
    bestBlocks: number,
    failedOpen: boolean,
    nowMs: number,
  ): RouteDecision {
    const cachedTokens = cachedOf(chosenBlocks, request);
    // cachedOf grows with the blocks matched, so the best match caches the most.
    const bestCachedTokens = cachedOf(bestBlocks, request);
    const uncachedTokens = request.promptTokens - cachedTokens;
    const queuedAheadTokens = this.#ledger.load(chosen.id).queuedPromptTokens;
    this.#apply(request, chosen.id, chosenBlocks, cachedTokens, nowMs);

    const spilled = cachedTokens < bestCachedTokens;
    const c = this.#counters;
    c.decisions++;
    c.cachedTokens += cachedTokens;
    c.uncachedTokens += uncachedTokens;
    if (spilled) c.spills++;
    if (failedOpen) c.failOpens++;
    return {
      requestId: request.id,
      replica: chosen.name,
      replicaId: chosen.id,
      policy: this.policy.name,
      cachedTokens,
      uncachedTokens,
      queuedAheadTokens,
      bestCachedTokens,
      spilled,
      failedOpen,
    };
  }

  /**
   * Whether replica `id` is among `considered` and its cost (SessionAffinityOptions) is within the
   * slack of the cheapest considered replica's.
   */
  #withinSlack(
    id: number,
    considered: readonly ReplicaState[],
    matched: ArrayLike<number>,
    request: RouteRequest,
  ): boolean {
    let best = Number.POSITIVE_INFINITY;
    let own: number | undefined;
    for (const s of considered) {
      const cost =
        this.#ledger.load(s.id).queuedPromptTokens +
        request.promptTokens -
        cachedOf(matched[s.id]!, request);
      if (cost < best) best = cost;
      if (s.id === id) own = cost;
    }
    return own !== undefined && own <= best + this.#sessionSlackTokens;
  }

  /** The request's first token came back: its prefill left the queue. False if unknown. */
  onFirstToken(requestId: string, nowMs: number): boolean {
    const entry = this.#ledger.firstToken(requestId);
    if (!entry) return false;
    if (entry.lora !== undefined) this.#adapters.firstToken(entry.replica, entry.lora);
    this.policy.onFirstToken?.(requestId, entry.replica, nowMs);
    return true;
  }

  /** Finished, aborted or failed: the ledger frees what it still held. False if unknown. */
  onFinished(requestId: string, nowMs: number): boolean {
    const entry = this.#ledger.finish(requestId);
    if (!entry) return false;
    this.#slotCaches.get(entry.replica)?.release(requestId);
    if (entry.lora !== undefined) {
      this.#adapters.finished(entry.replica, entry.lora, entry.decoding);
    }
    this.policy.onFinished?.(requestId, entry.replica, nowMs);
    return true;
  }

  /**
   * A peer router's assignment (another gateway sharing state): counted in the ledger under
   * (peer, request id), its adapter noted, its predicted prefix recorded (approximate index,
   * predict-on-route overlay from `nowMs`). Policy hooks are not called: they follow this
   * router's own decisions. False when the replica is not in this router's fleet.
   */
  applyPeerRoute(record: PeerRoute, nowMs: number): boolean {
    const id = this.#byName.get(record.replica);
    if (id === undefined) return false;
    const { peer, requestId, promptTokens, uncachedTokens, blockSize } = record;
    const previous = this.#ledger.finishPeer(peer, requestId);
    if (previous?.lora !== undefined) {
      this.#adapters.finished(previous.replica, previous.lora, previous.decoding);
    }
    this.#ledger.assignPeer(
      peer,
      requestId,
      {
        replica: id,
        promptTokens,
        uncachedTokens,
        promptBlocks: Math.ceil(promptTokens / blockSize),
        uncachedBlocks: Math.ceil(uncachedTokens / blockSize),
        blockSize,
        lora: record.lora ? record.lora : undefined,
      },
      record.decoding ?? false,
    );
    if (record.lora) {
      this.#adapters.routed(id, record.lora);
      if (record.decoding) this.#adapters.firstToken(id, record.lora);
    }
    const tail = record.blockKeys;
    if (tail !== undefined && tail.length > 0) {
      // The keys the route added there: from the first block it did not cache on (fromBlock).
      if (this.indexMode === 'approx') {
        this.#index.recordRoute(id, tail, nowMs, record.fromBlock ?? 0);
      }
      this.#overlay?.addTail(id, tail, record.fromBlock ?? 0, nowMs);
    }
    return true;
  }

  /**
   * A peer's request left prefill ('prefill': its first token came back) or ended ('done').
   * False when unknown (never seen, already ended, or its peer dropped).
   */
  applyPeerRelease(peer: string, requestId: string, stage: 'prefill' | 'done'): boolean {
    const entry =
      stage === 'prefill'
        ? this.#ledger.firstTokenPeer(peer, requestId)
        : this.#ledger.finishPeer(peer, requestId);
    if (!entry) return false;
    if (entry.lora !== undefined) {
      if (stage === 'prefill') this.#adapters.firstToken(entry.replica, entry.lora);
      else this.#adapters.finished(entry.replica, entry.lora, entry.decoding);
    }
    return true;
  }

  /** A peer left (stopped beating, or said goodbye): its entries go; returns how many. */
  dropPeer(peer: string): number {
    const dropped = this.#ledger.dropPeer(peer);
    for (const [, entry] of dropped) {
      if (entry.lora !== undefined) {
        this.#adapters.finished(entry.replica, entry.lora, entry.decoding);
      }
    }
    return dropped.length;
  }

  /** How many entries `peer` holds in this router's ledger (the sync bounds it). */
  peerEntries(peer: string): number {
    return this.#ledger.peerEntries(peer);
  }

  /** Peers with entries in this router's ledger. */
  peers(): string[] {
    return this.#ledger.peers();
  }

  /**
   * Every request in flight in the ledger, own (peer null) and peers', as records a peer can
   * apply (without block keys: predictions are short-lived). A late joiner's snapshot.
   */
  inFlight(): InFlightRecord[] {
    const records: InFlightRecord[] = [];
    for (const [peer, requestId, e] of this.#ledger.entries()) {
      const state = this.#replicas[e.replica]!;
      if (state.removed) continue;
      records.push({
        peer,
        requestId,
        replica: state.name,
        promptTokens: e.promptTokens,
        uncachedTokens: e.uncachedTokens,
        blockSize: e.blockSize,
        decoding: e.decoding,
        ...(e.lora !== undefined && { lora: e.lora }),
      });
    }
    return records;
  }

  /** An engine report: KV usage and queue gauges for the guards and report-based policies. */
  onReport(replica: string, report: ReplicaReport, nowMs: number): void {
    const state = this.#state(replica);
    state.report = { ...report };
    state.reportedAtMs = nowMs;
    this.#gauges.reported[state.id] = 1;
    this.#gauges.reportedAtMs[state.id] = nowMs;
    this.#gauges.kvUsage[state.id] = report.kvUsage ?? 0;
  }

  /**
   * The replica reports no load after all (its engine turned out to have no load endpoint): its
   * last report is dropped, so it is judged on the ledger alone instead of going stale.
   */
  forgetReport(replica: string): void {
    const state = this.#state(replica);
    state.report = undefined;
    state.reportedAtMs = undefined;
    this.#gauges.reported[state.id] = 0;
    this.#gauges.reportedAtMs[state.id] = 0;
    this.#gauges.kvUsage[state.id] = 0;
  }

  /** KV events from an engine that speaks kvroute block keys; returns blocks changed. */
  applyEvents(replica: string, events: readonly KvEvent[], nowMs: number): number {
    return this.#applyEvents(this.#state(replica), events, nowMs, null);
  }

  /** `sharedKeys`: the replica's ForeignKeyMap's, for events it translated (else null). */
  #applyEvents(
    state: ReplicaState,
    events: readonly KvEvent[],
    nowMs: number,
    sharedKeys: Map<BlockKey, number> | null,
  ): number {
    state.lastEventAtMs = nowMs;
    const fallback = this.#fallback.get(state.id);
    if (fallback) {
      // Not trusted: only a restart's clear is believed.
      if (anyCleared(events)) fallback.clear();
      return 0;
    }
    const changed = this.#index.applyEvents(state.id, events, sharedKeys);
    if (this.#overlay && anyCleared(events)) {
      this.#overlay.clearReplica(state.id);
    }
    this.#counters.eventBatches++;
    this.#counters.blocksChanged += changed;
    return changed;
  }

  /**
   * KV events from an engine with its own block hashes (vLLM, SGLang), as decoded off the wire:
   * keyed on their token ids with kvroute's hash; removals go through the engine hash map.
   */
  applyForeignEvents(replica: string, events: readonly ForeignKvEvent[], nowMs: number): number {
    const state = this.#state(replica);
    const foreign = (state.foreign ??= new ForeignKeyMap());
    return this.#applyEvents(state, foreign.translate(events), nowMs, foreign.sharedKeys);
  }

  /**
   * The replica's KV pool holds `blocks` blocks (vLLM's `num_gpu_blocks`): its engine hash map
   * makes room for them now, so that its events never wait on the map's growth. Events mode
   * only (in approx mode no engine hash is mapped).
   */
  reserveEngineBlocks(replica: string, blocks: number): void {
    if (this.indexMode !== 'events') return;
    const state = this.#state(replica);
    state.foreign ??= new ForeignKeyMap();
    state.foreign.reserve(blocks);
  }

  /**
   * How many leading blocks of `blockKeys` each replica that is not down holds, by replica id, as
   * `route` matches them (the index and its route overlay; 0 for a replica that is down). A read:
   * no counter, ledger or random draw moves, so asking changes no later decision.
   */
  prefixBlocks(blockKeys: readonly BlockKey[], nowMs: number): Int32Array {
    const replicas = this.#replicas;
    const alive = new Int32Array(this.#index.blocks.words);
    for (let id = 0; id < replicas.length; id++) {
      if (this.#gauges.verdict(id, nowMs, this.thresholds) === 'down') continue;
      alive[id >>> 5] = alive[id >>> 5]! | (1 << (id & 31));
    }
    const matched = new Int32Array(replicas.length);
    matchPrefix(this.#index.blocks, this.#overlay, blockKeys, alive, nowMs, matched);
    return matched;
  }

  /**
   * Whether the engines' KV events show block `key` stored on `replica`. Events mode only: in
   * approx mode the index is the router's own record of its routes, not what the engine did.
   */
  storedOn(replica: string, key: BlockKey): boolean {
    if (this.indexMode !== 'events') return false;
    return this.#index.blocks.has(key, this.#state(replica).id);
  }

  /**
   * The audit's last repair of a replica (events mode): forget what its events said and route it
   * on the router's own record of what it sent there, at most `capacityBlocks` blocks (its KV
   * pool), until `trustEvents`. Its events are ignored meanwhile (a clear excepted). Other
   * replicas are untouched.
   */
  distrustEvents(replica: string, capacityBlocks: number): void {
    const state = this.#state(replica);
    this.#index.clearReplica(state.id);
    this.#overlay?.clearReplica(state.id);
    state.foreign?.clear();
    this.#fallback.get(state.id)?.clear();
    this.#fallback.set(state.id, new ApproxFallback(this.#index.blocks, state.id, capacityBlocks));
  }

  /** Events are believed again: the replica's record is cleared, its cache relearned by events. */
  trustEvents(replica: string): void {
    const state = this.#state(replica);
    const fallback = this.#fallback.get(state.id);
    if (!fallback) return;
    fallback.clear();
    this.#fallback.delete(state.id);
    state.foreign?.clear();
  }

  /**
   * `replica`'s cache is a set of slots (llama.cpp's llama-server): its hits are predicted by a
   * model of its slots (slotCache.ts), not the index. Null: back to the index.
   */
  setSlotCache(replica: string, options: SlotCacheOptions | null): void {
    const { id } = this.#state(replica);
    if (options === null) this.#slotCaches.delete(id);
    else this.#slotCaches.set(id, new SlotCache(options));
  }

  /** Forgets what the index holds for a replica (its events will be replayed). */
  clearReplica(replica: string): void {
    const state = this.#state(replica);
    this.#slotCaches.get(state.id)?.clear();
    this.#index.clearReplica(state.id);
    this.#overlay?.clearReplica(state.id);
    this.#fallback.get(state.id)?.clear();
    state.foreign?.clear();
  }

  /** Where a replica's predictions come from: its events, or the router's own record. */
  indexSourceOf(replica: string): 'events' | 'approx' {
    if (this.indexMode === 'approx') return 'approx';
    return this.#fallback.has(this.#state(replica).id) ? 'approx' : 'events';
  }

  /** Blocks the index holds for a replica now (GPU tier: stored minus removed). */
  /** The replica's speed, when the fleet is mixed and its hardware was given; else undefined. */
  speedOf(replica: string): ReplicaSpeed | undefined {
    const id = this.#byName.get(replica);
    return id === undefined ? undefined : this.#replicas[id]!.speed;
  }

  indexedBlocksOf(replica: string): number {
    return this.#index.blockCount(this.#state(replica).id);
  }

  /** Health check failed: no new requests; the ledger keeps its in-flight requests. */
  markDown(replica: string): void {
    const state = this.#state(replica);
    state.healthy = false;
    this.#gauges.down[state.id] = 1;
  }

  /** Health check passed. A replica coming back from down is cold: its cache is forgotten. */
  markUp(replica: string): void {
    const state = this.#state(replica);
    if (state.healthy) return;
    state.healthy = true;
    this.#gauges.down[state.id] = 0;
    this.#forget(state);
  }

  /** JSON-able state for `/router/replicas`; with nowMs, each replica's guard verdict too. */
  snapshot(nowMs?: number): RouterSnapshot {
    const replicas: ReplicaSnapshot[] = [];
    for (const s of this.#replicas) {
      if (s.removed) continue;
      const load = this.#ledger.load(s.id);
      replicas.push({
        name: s.name,
        id: s.id,
        healthy: s.healthy,
        verdict: nowMs === undefined ? null : this.#verdict(s, nowMs),
        ...load,
        inFlight: load.prefillRequests + load.decodeRequests,
        kvUsage: s.report?.kvUsage ?? null,
        running: s.report?.running ?? null,
        waiting: s.report?.waiting ?? null,
        reportedQueuedPromptTokens: s.report?.queuedPromptTokens ?? null,
        reportedAtMs: s.reportedAtMs ?? null,
        reportAgeMs:
          nowMs === undefined || s.reportedAtMs === undefined ? null : nowMs - s.reportedAtMs,
        lastEventAtMs: s.lastEventAtMs ?? null,
        indexedBlocks: this.#index.blockCount(s.id),
        indexedBlocksByMedium: {
          GPU: this.#index.blockCount(s.id),
          CPU: this.#index.cpuBlockCount?.(s.id) ?? 0,
        },
        loraAdapters: this.#adapters.activeAdapters(s.id, s.report?.loras),
        maxLoras: s.report?.loras?.maxLoras ?? null,
      });
    }
    return {
      policy: this.policy.name,
      indexMode: this.indexMode,
      indexedKeys: this.#index.blocks.size,
      overlayPredictions: this.#overlay?.pending ?? 0,
      inFlightRequests: this.#ledger.size,
      replicas,
      counters: this.counters(),
    };
  }

  /** Monotonic counters for metrics, labelled by `policy`. */
  counters(): RouterCounters {
    return { policy: this.policy.name, ...this.#counters };
  }

  #apply(
    request: RouteRequest,
    replicaId: number,
    matchedBlocks: number,
    cachedTokens: number,
    nowMs: number,
  ): void {
    const uncachedTokens = request.promptTokens - cachedTokens;
    const previous = this.#ledger.get(request.id);
    if (previous) this.#slotCaches.get(previous.replica)?.release(request.id);
    if (previous?.lora !== undefined) {
      // A retry: its earlier assignment is released below (assign), its adapter here.
      this.#adapters.finished(previous.replica, previous.lora, previous.decoding);
    }
    this.#ledger.assign(request.id, {
      replica: replicaId,
      promptTokens: request.promptTokens,
      uncachedTokens,
      promptBlocks: Math.ceil(request.promptTokens / request.blockSize),
      uncachedBlocks: Math.ceil(uncachedTokens / request.blockSize),
      blockSize: request.blockSize,
      // No spread here: the ledger copies the fields, and an empty adapter name counts as none.
      lora: request.lora ? request.lora : undefined,
    });
    if (request.lora) this.#adapters.routed(replicaId, request.lora);
    this.#slotCaches
      .get(replicaId)
      ?.assign(request.id, request.blockKeys, request.promptTokens, request.blockSize);
    this.#index.recordRoute(replicaId, request.blockKeys, nowMs);
    this.#fallback.get(replicaId)?.recordRoute(request.blockKeys);
    this.#overlay?.add(replicaId, request.blockKeys, matchedBlocks, nowMs);
    this.policy.onRouted?.({ request, replicaId, cachedTokens, nowMs });
  }

  /**
   * The replica's view for this route: its own object, refilled in place. A route used to build
   * 64 objects of 19 fields for a 64-replica fleet, and collecting them was a tenth of a pick
   * (`bench:router`). Policies read views during `pick` only (`PickInput.candidates`).
   */
  #view(
    state: ReplicaState,
    request: RouteRequest,
    matchedBlocks: number,
    lora: Readonly<LoraView>,
  ): ReplicaView {
    const load = this.#ledger.load(state.id);
    const cachedTokens = Math.min(request.promptTokens, matchedBlocks * request.blockSize);
    const report = state.report;
    const view = state.view;
    view.cachedBlocks = matchedBlocks;
    view.cachedTokens = cachedTokens;
    view.cpuCachedTokens = Math.min(cachedTokens, this.#cpuMatched[state.id]! * request.blockSize);
    view.queuedPromptTokens = load.queuedPromptTokens;
    view.prefillRequests = load.prefillRequests;
    view.decodeRequests = load.decodeRequests;
    view.inFlight = load.prefillRequests + load.decodeRequests;
    view.activePrefillBlocks = load.activePrefillBlocks;
    view.activeDecodeBlocks = load.activeDecodeBlocks;
    view.kvUsage = report?.kvUsage ?? 0;
    view.running = report?.running ?? 0;
    view.waiting = report?.waiting ?? 0;
    view.reportedQueuedPromptTokens = report?.queuedPromptTokens;
    view.reportedAtMs = state.reportedAtMs;
    view.indexedBlocks = this.#index.blockCount(state.id);
    view.lora = lora;
    view.speed = state.speed;
    return view;
  }

  #pickInput(request: RouteRequest, nowMs: number, candidates: ReplicaView[]): PickInput {
    return {
      request,
      nowMs,
      candidates,
      fleet: this.#fleet,
      fleetVersion: this.#fleetVersion,
      rng: this.#rng,
    };
  }

  #verdict(state: ReplicaState, nowMs: number): Verdict {
    return this.#gauges.verdict(state.id, nowMs, this.thresholds);
  }

  #forget(state: ReplicaState): void {
    this.#slotCaches.get(state.id)?.clear();
    this.#index.clearReplica(state.id);
    this.#fallback.get(state.id)?.clear();
    this.#overlay?.clearReplica(state.id);
    state.foreign?.clear();
    this.#adapters.forget(state.id);
    this.policy.onReplicaRemoved?.(state.id);
  }

  #fleetChanged(): void {
    this.#fleet = Object.freeze(this.#replicas.map((r) => (r.removed ? null : r.name)));
    this.#fleetVersion++;
  }

  #state(name: string): ReplicaState {
    const id = this.#byName.get(name);
    if (id === undefined) {
      throw new RouterError('ERR_UNKNOWN_REPLICA', `unknown replica '${name}'`);
    }
    return this.#replicas[id]!;
  }
}

/** Prompt tokens in a request's first `blocks` blocks (its cached prefix there). */
function cachedOf(blocks: number, request: RouteRequest): number {
  return Math.min(request.promptTokens, blocks * request.blockSize);
}

/** Whether a batch holds a restart's clear (a loop: no closure made per batch). */
function anyCleared(events: readonly KvEvent[]): boolean {
  for (let i = 0; i < events.length; i++) if (events[i]!.type === 'AllBlocksCleared') return true;
  return false;
}
