/**
 * A model pool: the replicas of one base model and everything that routes among them, namely its
 * router (prefix index, ledger, policy), its prompt tokenizer and template, its set of backends
 * and one watch per backend (health, load reports, KV events). Backends join and leave at run
 * time: a backend added cold enters routing only after its first load report; a removed one
 * drains (no new requests; closed when its last in-flight request ends). The contract the
 * generate path, the admin API and anything else that routes relies on is in README.md.
 */
import type { QueueView } from '../admission/queueBound.ts';
import type { BlockKey } from '../kv/blockKey.ts';
import {
  DEFAULT_APPROX_CAPACITY_BLOCKS,
  type ReplicaSnapshot,
  type RouteDecision,
  Router,
  type RouterSnapshot,
  type RouteRequest,
} from '../router/index.ts';
import type { PromptTokenizer } from '../tokenizer/promptTokenizer.ts';
import type { RequestTokenizer } from './request.ts';
import { localTokenizer, remoteTokenizer, type TokenizeMode } from './requestTokenizers.ts';
import { type CheckResult, TokenizerChecker, type TokenizerAgreement } from './tokenizerCheck.ts';
import { makeAuditActions } from './audit/actions.ts';
import { PoolAudit, type ReplicaAudit } from './audit/poolAudit.ts';
import type { AuditEvidence } from '../router/audit/index.ts';
import { type Backend, closeBackend } from './backends.ts';
import { backendApproxTiers } from './backendCpuTier.ts';
import { backendHostCacheBlocks } from './backendHostCache.ts';
import { backendSpeed } from './backendSpeed.ts';
import type { GatewayConfig } from './config.ts';
import { type PoolRouterConfig, poolRouterOptions } from './poolRouter.ts';
import { type Logger, RateLimitedLog } from './log.ts';
import type { ServedModels } from './models.ts';
import { PrefillWatch } from './prefillWatch.ts';
import { isClosedConnection } from './reconnect.ts';
import type { EngineReport } from './scraper.ts';
import type { SubscriberStats } from './subscriber.ts';
import { BackendWatch } from './watch.ts';
import { learnEngine } from './engineDetect.ts';
import type { EngineShape } from '../engines/dialect.ts';
import type { CentralEvents } from './centralEvents.ts';

/** A replica whose KV events fail to decode, or whose engine restarts, logs at most this often. */
const DECODE_ERROR_LOG_MS = 10_000;
/** The first check for backends whose KV events do not arrive, after the pool starts. */
const FIRST_EVENTS_CHECK_MS = 10_000;

/** What `/router/backends` says of a backend. */
export type BackendState = 'starting' | 'active' | 'down' | 'draining';

export interface BackendInfo {
  name: string;
  url: string;
  events: string | null;
  replay: string | null;
  /** Base model of its pool; null: not known (its backend answers for itself). */
  model: string | null;
  adapters: string[];
  state: BackendState;
  inFlight: number;
}

/** One routed attempt: where it goes. Hand it back to `finish` when the attempt is over. */
export interface PoolRoute {
  readonly decision: RouteDecision;
  readonly backend: Backend;
}

/** A replica in `/router/replicas`: the router's view plus the backend's wiring. */
export interface PoolReplicaSnapshot extends ReplicaSnapshot {
  model: string | null;
  url: string;
  events: string | null;
  probing: boolean;
  /** Its engine's kind (`engines/`), once known. */
  engine: string | null;
  /** Whether the gateway's token ids match the replica's (the tokenizer agreement check). */
  tokenizer: TokenizerAgreement;
  subscriber: SubscriberStats | null;
  /** Its predictions graded against what it reported reusing (`audit/`). */
  audit: ReplicaAudit;
}

export interface PoolSnapshot extends Omit<RouterSnapshot, 'replicas'> {
  model: string | null;
  replicas: PoolReplicaSnapshot[];
}

/**
 * Told of every change the pool makes to its router's ledger (the state sync between gateways
 * publishes them): a decision, and a request leaving prefill or ending.
 */
export interface RouteObserver {
  routed(model: string | null, decision: RouteDecision, request: RouteRequest): void;
  released(model: string | null, requestId: string, stage: 'prefill' | 'done'): void;
}

/** The settings a pool reads from the gateway's config. */
export type PoolConfig = PoolRouterConfig &
  Pick<GatewayConfig, 'scrapeMs'> &
  Partial<Pick<GatewayConfig, 'eventsCheckMs'>>;

export interface PoolOptions {
  /** The base model; null gathers the backends whose model is not known. */
  model: string | null;
  config: PoolConfig;
  tokenizer: PromptTokenizer;
  /** 'local': the pool's tokenizer; 'remote': a member's /tokenize for every request. */
  tokenize: TokenizeMode;
  /** --tokenize remote found no member to tokenize a request: it was tokenized here. */
  onRemoteFallback?(error: Error): void;
  logger: Logger;
  /** A member came back up after being down (its models may have changed). */
  onBackendUp?(name: string): void;
  /** A backend added cold entered routing. */
  onBackendActive?(name: string): void;
  observer?: RouteObserver;
  /** The gateway's bound KV event socket (`--kv-events-bind`), shared by every pool. */
  central?: CentralEvents | null;
}

class Member {
  readonly watch: BackendWatch;
  /** starting: not routed until its first report; active: in the router; draining: leaving. */
  phase: 'starting' | 'active' | 'draining';
  down = false;
  /** It answered since it joined (a load report or a health probe): it can be called ready. */
  answered = false;
  inFlight = 0;
  /**
   * Requests routed here with at least one full block of prompt (whose prefill stores a block,
   * so a KV event): the events check warns when some were served and no batch came.
   */
  routed = 0;
  closed: Promise<void> | null = null;
  /** Its engine's shape (llama.cpp's slots), learned with its dialect. */
  shape: EngineShape = { slots: null };
  /** Resolves once its engine is known (engineDetect.ts), asked at start and when it is back. */
  learned: Promise<void> | null = null;
  /** Resolves when a draining member has closed. */
  drained: Promise<void> | null = null;
  release: (() => void) | null = null;

  constructor(
    readonly backend: Backend,
    public served: ServedModels,
    phase: 'starting' | 'active',
    makeWatch: (m: Member) => BackendWatch,
  ) {
    this.phase = phase;
    this.watch = makeWatch(this);
  }
}

export class ModelPool {
  readonly model: string | null;
  readonly router: Router;
  readonly tokenizer: PromptTokenizer;
  /** What the generate path tokenizes a request with: the pool's tokenizer, or a member's. */
  readonly requestTokenizer: RequestTokenizer;
  /** Does each member tokenize as the pool does? Probed when it joins and when it comes back. */
  readonly checker: TokenizerChecker;
  /** Each replica's predictions against what its engine reported reusing; repairs. */
  readonly audit: PoolAudit;
  readonly #kvBlocks = new Map<string, number>();
  readonly #prefill: PrefillWatch;
  readonly #options: PoolOptions;
  readonly #logger: Logger;
  readonly #decodeErrors = new RateLimitedLog(DECODE_ERROR_LOG_MS);
  readonly #restarts = new RateLimitedLog(DECODE_ERROR_LOG_MS);
  #eventsCheck: NodeJS.Timeout | null = null;
  /** Starting and active members by replica name. */
  readonly #members = new Map<string, Member>();
  /** Every member still open, draining ones included, by its backend. */
  readonly #byBackend = new Map<Backend, Member>();
  #started = false;
  /** The approximate record is a peer's (llm-d's), which models no backend's tiers. */
  readonly #peerRecord: boolean;
  /** Told after each change of the router's view of load (flow control dispatches on it). */
  readonly #loadListeners = new Set<() => void>();

  constructor(options: PoolOptions) {
    const { config } = options;
    this.model = options.model;
    this.tokenizer = options.tokenizer;
    this.#options = options;
    this.#logger = options.logger;
    const routerOptions = poolRouterOptions(config);
    this.#peerRecord = routerOptions.approxForgetting !== undefined;
    this.router = new Router(routerOptions);
    this.#prefill = new PrefillWatch(this.router, (requestId) => {
      options.observer?.released(this.model, requestId, 'prefill');
      this.#loadChanged();
    });
    this.checker = new TokenizerChecker(options.tokenizer, (backend, result) =>
      this.#reportAgreement(backend, result),
    );
    this.audit = new PoolAudit({
      model: this.model,
      blockSize: config.blockSize,
      logger: this.#logger,
      actions: makeAuditActions({
        router: this.router,
        checker: this.checker,
        member: (name) => {
          const m = this.#members.get(name);
          return (
            m && {
              backend: m.backend,
              rebuild: () => m.watch.rebuild(),
              stats: () => m.watch.stats(),
            }
          );
        },
        kvBlocks: (name) => this.#kvBlocks.get(name),
      }),
      indexSource: (name) =>
        this.router.replicaNames.includes(name) ? this.router.indexSourceOf(name) : 'events',
      evidence: (name) => this.#auditEvidence(name),
      approxOnly: (name) =>
        this.router.indexMode === 'approx' ||
        this.#members.get(name)?.backend.dialect?.cacheSource === 'ledger',
    });
    const local = localTokenizer(options.tokenizer);
    this.requestTokenizer =
      options.tokenize === 'remote'
        ? remoteTokenizer({
            upBackends: () =>
              [...this.#members.values()]
                .filter((m) => m.phase === 'active' && !m.down)
                .map((m) => m.backend),
            fallback: local,
            onFallback: (err) => options.onRemoteFallback?.(err),
          })
        : local;
  }

  /**
   * `listener` is called after each change of the load the router sees (a request's prefill or
   * attempt ended, a load report, a replica up or down, a member added); returns its removal.
   */
  onLoadChange(listener: () => void): () => void {
    this.#loadListeners.add(listener);
    return () => this.#loadListeners.delete(listener);
  }

  #loadChanged(): void {
    for (const listener of this.#loadListeners) listener();
  }

  /** The healthy replicas' ledgers, for the fleet queue bound (`--max-queue-ms`). */
  queues(nowMs: number): QueueView[] {
    return this.router
      .snapshot(nowMs)
      .replicas.filter((r) => r.verdict !== 'down')
      .map((r) => ({
        queuedPromptTokens: r.queuedPromptTokens,
        eligible: r.verdict === 'eligible',
      }));
  }

  /** The largest context window a member reported (Infinity while none has). */
  maxModelLen(): number {
    return this.checker.maxModelLen();
  }

  /** Members that route or will (starting and active), by name. */
  get names(): string[] {
    return [...this.#members.keys()];
  }

  /** Members in the router now (active, up or down): the pool serves its model. */
  get activeCount(): number {
    let n = 0;
    for (const m of this.#members.values()) if (m.phase === 'active') n++;
    return n;
  }

  /**
   * Members that serve now: in the router, not down, and heard from (a load report or a health
   * probe answered) since they joined. Readiness (`GET /ready`) wants one per pool.
   */
  get healthyCount(): number {
    let n = 0;
    for (const m of this.#members.values()) if (m.phase === 'active' && !m.down && m.answered) n++;
    return n;
  }

  /** Members still open, draining ones included: the pool can be dropped at zero. */
  get openCount(): number {
    return this.#byBackend.size;
  }

  has(name: string): boolean {
    return this.#members.has(name);
  }

  /** Whether `base` is a name of this pool's model (any member's served name counts). */
  knows(base: string): boolean {
    if (base === this.model) return true;
    for (const m of this.#members.values()) if (m.served.bases.includes(base)) return true;
    return false;
  }

  backendOf(name: string): Backend | undefined {
    return this.#members.get(name)?.backend;
  }

  /** What the active members serve: base names and adapters. */
  served(): ServedModels[] {
    return [...this.#members.values()].filter((m) => m.phase === 'active').map((m) => m.served);
  }

  /**
   * Adds a backend. Warm (the gateway's configured backends at start): routed at once, as the
   * gateway always did. Cold (added at run time): scraped and subscribed first, routed from its
   * first load report on (the caller has seen it answer `/health`).
   */
  addBackend(backend: Backend, served: ServedModels, options: { cold: boolean }): void {
    if (this.#members.has(backend.name)) {
      throw new Error(`backend ${backend.name} is already in the pool`);
    }
    const member = new Member(backend, served, options.cold ? 'starting' : 'active', (m) =>
      this.#watch(m),
    );
    this.#members.set(backend.name, member);
    this.#byBackend.set(backend, member);
    if (!options.cold) this.#addToRouter(backend);
    if (this.#started) {
      member.watch.start();
      void this.#learn(member, !options.cold);
    }
  }

  /** Starts every member's watch (the gateway's server is listening). */
  start(): void {
    this.#started = true;
    for (const m of this.#members.values()) {
      m.watch.start();
      void this.#learn(m, m.phase === 'active');
    }
    if (this.#options.config.index === 'events') {
      const everyMs = this.#options.config.eventsCheckMs ?? 60_000;
      this.#eventsCheck = setTimeout(
        () => {
          this.checkEvents();
          this.#eventsCheck = setInterval(() => this.checkEvents(), everyMs);
          this.#eventsCheck.unref();
        },
        Math.min(FIRST_EVENTS_CHECK_MS, everyMs),
      );
      this.#eventsCheck.unref();
    }
  }

  /**
   * Warns about each routed backend with an events source whose KV events have not arrived:
   * its own endpoint never connected (nothing listens there: two sides that both connect, as
   * vLLM connects to an endpoint without `*`), or no batch came while it served requests.
   * Runs shortly after start and then every `eventsCheckMs`; returns the backends warned about.
   */
  checkEvents(): string[] {
    const warned: string[] = [];
    for (const m of this.#members.values()) {
      const stats = m.watch.stats();
      const source = m.watch.eventsSource;
      if (m.phase !== 'active' || m.down || !stats || stats.batches > 0) continue;
      const where = {
        replica: m.backend.name,
        model: this.model,
        events: m.backend.config.events ?? this.#options.central?.endpoint ?? null,
        served: m.routed,
      };
      if (source === 'own' && !stats.connected) {
        this.#logger.warn(
          where,
          "KV events: nothing accepts a connection at this backend's events endpoint (an engine publishing to an address without * connects too, vLLM's rule): bind one side (the engine's --kv-events tcp://*:P, or kvroute's --kv-events-bind)",
        );
        warned.push(m.backend.name);
      } else if (m.routed > 0) {
        this.#logger.warn(
          where,
          source === 'central'
            ? 'KV events: no batch from this backend while it served requests: does its engine publish to the bound endpoint, under a topic naming it (kv@<its host>@<model>, or its topic= key)?'
            : 'KV events: no batch from this backend while it served requests: is its engine publishing there (--kv-events)?',
        );
        warned.push(m.backend.name);
      }
    }
    return warned;
  }

  /** What a member serves now (null: no such member). */
  servedOf(name: string): ServedModels | null {
    return this.#members.get(name)?.served ?? null;
  }

  /** New `/v1/models` of a member (same base model; its adapters may differ). */
  updateServed(name: string, served: ServedModels): void {
    const m = this.#members.get(name);
    if (m) m.served = served;
  }

  /**
   * Takes a backend out: no new request goes there from now on; it closes when its in-flight
   * requests end. Resolves then; false when the pool has no such backend.
   */
  async removeBackend(name: string): Promise<boolean> {
    const m = this.#members.get(name);
    if (!m) return false;
    this.#members.delete(name);
    if (m.phase === 'active') this.router.removeReplica(name);
    this.audit.remove(name);
    m.phase = 'draining';
    m.drained = new Promise<void>((resolve) => {
      m.release = resolve;
    });
    void m.watch.close();
    this.#logger.info(
      { replica: name, model: this.model, inFlight: m.inFlight },
      'backend draining: no new requests, in-flight ones finish',
    );
    if (m.inFlight === 0) void this.#close(m);
    await m.drained;
    return true;
  }

  /**
   * Picks a replica for `request` and counts the attempt in flight there. An adapter request
   * goes to the replicas that list the adapter, when any does. Throws the router's
   * ERR_NO_HEALTHY_REPLICA when none can take it.
   */
  route(request: RouteRequest, nowMs: number): PoolRoute {
    const decision = this.router.route(this.#withAdapterReplicas(request), nowMs);
    this.#options.observer?.routed(this.model, decision, request);
    const member = this.#members.get(decision.replica)!;
    member.inFlight++;
    if (request.promptTokens >= request.blockSize) member.routed++;
    return { decision, backend: member.backend };
  }

  /** A non-streamed attempt: its prefill ends when the engine's KV events show its prompt. */
  watchPrefill(route: PoolRoute, blockKeys: readonly BlockKey[]): void {
    this.#prefill.watch(route.backend.name, route.decision.requestId, blockKeys);
  }

  /** The attempt's first token came back: its prompt leaves the replica's queue. */
  firstToken(route: PoolRoute, nowMs: number): void {
    const id = route.decision.requestId;
    if (this.router.onFirstToken(id, nowMs)) {
      this.#options.observer?.released(this.model, id, 'prefill');
      this.#loadChanged();
    }
  }

  /** The attempt is over, however it ended. */
  finish(route: PoolRoute, nowMs: number): void {
    this.#prefill.unwatch(route.backend.name, route.decision.requestId);
    const id = route.decision.requestId;
    if (this.router.onFinished(id, nowMs)) this.#options.observer?.released(this.model, id, 'done');
    const m = this.#byBackend.get(route.backend);
    if (m) {
      m.inFlight--;
      if (m.phase === 'draining' && m.inFlight === 0) void this.#close(m);
    }
    this.#loadChanged();
  }

  /** A request found this backend unreachable: no traffic until its health probe answers. */
  markDown(backend: Backend, reason: string): void {
    const m = this.#members.get(backend.name);
    if (!m || m.backend !== backend || m.down) return;
    m.down = true;
    if (m.phase === 'active') this.router.markDown(backend.name);
    this.#logger.warn({ replica: backend.name, model: this.model, reason }, 'replica down');
    m.watch.watchHealth();
    this.#loadChanged();
  }

  /** One `/health` probe; a failed one marks the backend down. */
  async probe(backend: Backend): Promise<boolean> {
    const m = this.#byBackend.get(backend);
    if (!m) return false;
    const healthy = await m.watch.probe();
    if (!healthy) this.markDown(backend, 'its health probe failed or timed out');
    return healthy;
  }

  /** Every member's state, draining ones included. */
  backends(): BackendInfo[] {
    return [...this.#byBackend.values()].map((m) => ({
      name: m.backend.name,
      url: m.backend.config.url,
      events: m.backend.config.events,
      replay: m.backend.config.replay,
      model: this.model,
      adapters: [...m.served.adapters.keys()],
      state: m.phase === 'active' && m.down ? 'down' : m.phase,
      inFlight: m.inFlight,
    }));
  }

  /** The router's snapshot with each replica's model and wiring. */
  snapshot(nowMs: number): PoolSnapshot {
    const snap = this.router.snapshot(nowMs);
    return {
      model: this.model,
      ...snap,
      replicas: snap.replicas.map((r) => {
        const m = this.#members.get(r.name)!;
        return {
          ...r,
          model: this.model,
          url: m.backend.config.url,
          events: m.backend.config.events,
          probing: m.watch.probing,
          engine: m.backend.dialect?.kind ?? null,
          tokenizer: this.checker.agreement(m.backend),
          subscriber: m.watch.stats(),
          audit: this.audit.view(r.name),
        };
      }),
    };
  }

  /** Closes every member now, in-flight requests or not (the gateway is shutting down). */
  async close(): Promise<void> {
    if (this.#eventsCheck) clearTimeout(this.#eventsCheck);
    this.checker.close();
    this.#members.clear();
    await Promise.all([...this.#byBackend.values()].map((m) => this.#close(m)));
  }

  #close(m: Member): Promise<void> {
    m.closed ??= (async () => {
      await m.watch.close();
      await closeBackend(m.backend);
      this.#byBackend.delete(m.backend);
      if (m.phase === 'draining') {
        this.#logger.info({ replica: m.backend.name, model: this.model }, 'backend drained');
      }
      m.release?.();
    })();
    return m.closed;
  }

  /** Adapter requests avoid the replicas that do not list the adapter, unless none does. */
  #withAdapterReplicas(request: RouteRequest): RouteRequest {
    if (request.lora === undefined) return request;
    const without: string[] = [];
    let withIt = 0;
    for (const m of this.#members.values()) {
      if (m.phase !== 'active') continue;
      if (m.served.adapters.has(request.lora)) withIt++;
      else without.push(m.backend.name);
    }
    if (withIt === 0 || without.length === 0) return request;
    return { ...request, avoid: [...(request.avoid ?? []), ...without] };
  }

  /** Into the router: its speed in a mixed pool, its CPU tier for the approximate index. */
  #addToRouter(backend: Backend): void {
    const { config } = backend;
    this.router.addReplica(
      backend.name,
      backendSpeed(config),
      this.#peerRecord ? undefined : backendApproxTiers(config, this.#options.config.blockSize),
    );
  }

  /**
   * Becomes routable: in the router from now, its cache relearned from its replay buffer. With
   * no report (its engine reports no load), it is judged on the router's ledger.
   */
  #activate(m: Member, report: EngineReport | null, nowMs: number): void {
    m.phase = 'active';
    this.#addToRouter(m.backend);
    if (report) this.router.onReport(m.backend.name, report, nowMs);
    this.#applyEngine(m);
    m.watch.rebuild();
    this.#logger.info(
      { replica: m.backend.name, model: this.model, engine: m.backend.dialect?.kind ?? null },
      report
        ? 'backend active: health answered, load reported, events subscribed'
        : 'backend active: health answered, its engine reports no load (routed on the ledger)',
    );
    void (m.learned ?? Promise.resolve()).then(() => this.checker.check(m.backend));
    this.#options.onBackendActive?.(m.backend.name);
    this.#loadChanged();
  }

  /**
   * Learns its engine (its `engine=` key, or what it serves), then checks its tokenizer when
   * `check`. A starting member whose engine reports no load is activated at once.
   */
  #learn(m: Member, check: boolean): Promise<void> {
    m.learned = learnEngine(m.backend).then((facts) => {
      if (m.phase === 'draining') return;
      m.backend.dialect = facts.dialect;
      m.shape = { slots: facts.props?.slots ?? null };
      // A llama-server slot holds one sequence: a prompt past its n_ctx is the gateway's 400.
      const slotContext = facts.props?.slotContextTokens ?? null;
      if (slotContext !== null) this.checker.setMaxModelLen(m.backend.name, slotContext);
      this.#logger.info(
        {
          replica: m.backend.name,
          model: this.model,
          engine: facts.dialect.kind,
          how: facts.how,
          slots: m.shape.slots,
        },
        'backend engine',
      );
      if (m.phase === 'active') this.#applyEngine(m);
      else if (facts.dialect.loadPath === null) this.#activate(m, null, Date.now());
    });
    return check ? m.learned.then(() => void this.checker.check(m.backend)) : m.learned;
  }

  /**
   * The audit's evidence for a replica: its KV pool (the backend's `kv-blocks`, else its
   * engine's `num_gpu_blocks`) and, while its index follows its events, the blocks indexed.
   */
  #auditEvidence(name: string): AuditEvidence | undefined {
    const poolBlocks = this.#members.get(name)?.backend.config.kvBlocks ?? this.#kvBlocks.get(name);
    if (poolBlocks === undefined || !this.router.replicaNames.includes(name)) return undefined;
    if (this.router.indexSourceOf(name) !== 'events') return { poolBlocks };
    return { poolBlocks, indexedBlocks: this.router.indexedBlocksOf(name) };
  }

  /** Its cache model in the router, as its engine keeps its cache. */
  #applyEngine(m: Member): void {
    const dialect = m.backend.dialect;
    if (!dialect || !this.router.replicaNames.includes(m.backend.name)) return;
    const name = m.backend.name;
    // A report taken before its dialect was known (a /metrics read as vLLM's) would go stale and
    // take the replica out of routing; an engine that reports no load is judged on the ledger.
    if (dialect.loadPath === null) this.router.forgetReport(name);
    if (dialect.cacheSource === 'slots' && m.shape.slots !== null) {
      // Its host prompt cache, where the backend sizes it (`--cache-ram` is not served):
      // upstream saves idle slots into it by default (`--cache-idle-slots`).
      const hostBlocks = backendHostCacheBlocks(m.backend.config, this.#options.config.blockSize);
      this.router.setSlotCache(name, {
        slots: m.shape.slots,
        ...(hostBlocks !== undefined && { hostBlocks, saveIdleSlots: true }),
      });
    } else {
      this.router.setSlotCache(name, null);
    }
    if (dialect.cacheSource === 'ledger' && this.#options.config.index === 'events') {
      // No events will come: its cache is the router's own record of what it sent there.
      this.router.distrustEvents(
        name,
        m.backend.config.kvBlocks ?? this.#kvBlocks.get(name) ?? DEFAULT_APPROX_CAPACITY_BLOCKS,
      );
    }
  }

  /** A mismatch is loud: routing keys will not match that replica's cache. */
  #reportAgreement(backend: Backend, result: CheckResult): void {
    const where = { replica: backend.name, model: this.model, detail: result.detail };
    if (result.agreement === 'differs' && this.#options.tokenize === 'remote') {
      // Requests are tokenized by the engines: only the fallback (no engine up) differs.
      this.#logger.warn(
        where,
        'the local fallback tokenizer differs from this replica; requests are tokenized remotely, so routing is unaffected unless no replica can tokenize (serve --tokenizer with its model folder to fix the fallback)',
      );
    } else if (result.agreement === 'differs') {
      this.#logger.error(
        where,
        'TOKENIZER MISMATCH: its cache will look empty to the router; serve --tokenizer with its model folder, or use --tokenize remote',
      );
    } else if (result.agreement === 'unknown') {
      this.#logger.warn(where, 'cannot compare tokenizers');
    }
  }

  /** Its health probe answered: a replica marked down routes again. */
  #onUp(m: Member): void {
    const name = m.backend.name;
    if (m.phase === 'draining' || !m.down) return;
    m.down = false;
    m.answered = true;
    if (m.phase === 'active') {
      this.router.markUp(name);
      m.watch.rebuild();
      this.#loadChanged();
    }
    this.#logger.info(
      { replica: name, model: this.model },
      'replica up: its health probe answered',
    );
    void this.#learn(m, true);
    this.#options.onBackendUp?.(name);
  }

  /** A load report from its /metrics: activates a starting replica, feeds an active one's gauges. */
  #onReport(m: Member, report: EngineReport, nowMs: number): void {
    const name = m.backend.name;
    m.answered = true;
    // A scrape begun before its dialect was known read /metrics as vLLM's: an engine that
    // reports no load is judged on the ledger (a report would only go stale).
    if (m.backend.dialect?.loadPath === null) {
      if (m.phase === 'starting') this.#activate(m, null, nowMs);
      return;
    }
    if (m.phase === 'starting') this.#activate(m, report, nowMs);
    else if (m.phase === 'active') this.router.onReport(name, report, nowMs);
    if (report.kvBlocks !== undefined) {
      this.#kvBlocks.set(name, report.kvBlocks);
      // Its engine hash map sized for the pool at once (a no-op once it is), not grown
      // while events arrive.
      if (m.phase === 'active') this.router.reserveEngineBlocks(name, report.kvBlocks);
    }
    if (m.phase === 'active' && report.prefixCacheHitsTokens !== undefined) {
      this.audit.onHitCounter(name, report.prefixCacheHitsTokens);
    }
    this.#loadChanged();
  }

  #watch(m: Member): BackendWatch {
    const name = m.backend.name;
    const config = this.#options.config;
    return new BackendWatch(
      m.backend,
      {
        scrapeMs: config.scrapeMs,
        events: config.index === 'events',
        blockSize: config.blockSize,
        central: this.#options.central ?? null,
      },
      {
        isDown: () => m.down,
        onUp: () => this.#onUp(m),
        engine: () => (m.backend.dialect ? { dialect: m.backend.dialect, shape: m.shape } : null),
        onNoReport: () => {
          // Its engine is known and exports none of its dialect's gauges: it routes anyway.
          if (m.phase === 'starting' && m.backend.dialect) this.#activate(m, null, Date.now());
        },
        onReport: (report, nowMs) => this.#onReport(m, report, nowMs),
        onUnreachable: (err) => {
          // A reset may be a kept-alive scrape connection the engine closed as it went out:
          // its health probe (which asks again on a closed connection) decides.
          if (isClosedConnection(err)) void this.probe(m.backend);
          else this.markDown(m.backend, err.message);
        },
        onSilent: () => void this.probe(m.backend),
        onEvents: (events, nowMs) => {
          // Before it is routed, events only warm a cache the replay at activation relearns.
          if (m.phase !== 'active') return;
          this.router.applyForeignEvents(name, events, nowMs);
          this.#prefill.onEvents(name, nowMs);
        },
        onRestart: () => {
          if (m.phase !== 'active') return;
          this.#restarts.maybe(name, Date.now(), (heldBack) =>
            this.#logger.warn(
              { replica: name, model: this.model, heldBack },
              'engine restarted (its event sequence went back): its cached blocks are forgotten',
            ),
          );
          this.router.applyForeignEvents(name, [{ type: 'AllBlocksCleared' }], Date.now());
        },
        onBroken: (restarts) => {
          this.#logger.error(
            { replica: name, model: this.model, restarts },
            'broken KV event publisher: its sequence went back too often to be a restart; its events are ignored (its cache looks empty) until it sends in order for 10 s',
          );
          this.router.applyForeignEvents(name, [{ type: 'AllBlocksCleared' }], Date.now());
        },
        onTrusted: () =>
          this.#logger.info(
            { replica: name, model: this.model },
            'KV event publisher in order again: its events are applied again (its cache relearned from its replay buffer)',
          ),
        onDecodeError: (err) =>
          this.#decodeErrors.maybe(name, Date.now(), (heldBack) =>
            this.#logger.warn(
              { replica: name, err, heldBack },
              'a KV event batch could not be decoded; the replica is known less well',
            ),
          ),
      },
    );
  }
}
