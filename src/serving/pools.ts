/**
 * The gateway's model pools: one `ModelPool` per base model, and the map from a request's
 * `model` to a pool and maybe a LoRA adapter, learned from each backend's `/v1/models`. Backends
 * are placed in the pool of the base model they serve; one whose model cannot be learned (it
 * does not answer `/v1/models` and its entry names no `model=`) goes to a pool of its own that
 * takes the requests no other pool claims, and answers them itself as before.
 *
 * Backends added at run time start cold: probed (`/health`, with backoff) and asked for their
 * models before they join a pool, then scraped and subscribed before they take traffic. A
 * backend's models are read again when it comes back up, when a request names a model nobody
 * serves, and when `/v1/models` is asked after a while; one without `model=` that now serves
 * another base model moves (drains from its old pool, starts cold in the new one). One with
 * `model=` never moves: that name is its pool's, whatever id its engine reports.
 */
import { ApiError } from '../openai/errors.ts';
import type { RouterCounters } from '../router/index.ts';
import type { PromptTokenizer } from '../tokenizer/promptTokenizer.ts';
import type { ReplicaLoad } from './metrics.ts';
import type { TokenizeMode } from './requestTokenizers.ts';
import type { TokenizerAgreement } from './tokenizerCheck.ts';
import {
  type Backend,
  backendNames,
  closeBackend,
  makeBackend,
  type ModelCard,
  probeHealth,
  readModelCards,
  replicaName,
} from './backends.ts';
import type { BackendConfig } from './backendConfig.ts';
import { HEALTH_BACKOFF_START_MS, nextProbeDelayMs } from './health.ts';
import type { Logger } from './log.ts';
import { mergeCards, type ServedModels, servedModels } from './models.ts';
import {
  type BackendInfo,
  ModelPool,
  type PoolConfig,
  type PoolReplicaSnapshot,
  type PoolSnapshot,
  type RouteObserver,
} from './pool.ts';
import type { CentralEvents } from './centralEvents.ts';

/** A request names a model no pool serves: the backends are asked again at most this often. */
export const UNKNOWN_MODEL_REFRESH_MS = 1_000;
/** `/v1/models` answers from what the backends said at most this long ago. */
export const MODELS_MAX_AGE_MS = 5_000;

/** Where a request's `model` goes. */
export interface Target {
  pool: ModelPool;
  /** The LoRA adapter it names, or null for the base model. */
  adapter: string | null;
}

export interface PoolsOptions {
  config: PoolConfig;
  logger: Logger;
  /** The tokenizer and template of a pool's model (null: the pool of unknown models). */
  tokenizerFor(model: string | null): PromptTokenizer;
  /** 'local' or 'remote' (--tokenize), for every pool. */
  tokenize: TokenizeMode;
  onRemoteFallback?(error: Error): void;
  /** Told of every pool's ledger changes (the state sync). */
  observer?: RouteObserver;
  /** The bound KV event socket (`--kv-events-bind`); the pools own it and close it. */
  central?: CentralEvents | null;
}

/** A backend added at run time, not yet placed: waiting for its health and models. */
interface Pending {
  backend: Backend;
  cancelled: boolean;
  wake: (() => void) | null;
}

type CounterKey = Exclude<keyof RouterCounters, 'policy'>;
const COUNTER_KEYS: readonly CounterKey[] = [
  'decisions',
  'cachedTokens',
  'uncachedTokens',
  'spills',
  'failOpens',
  'noHealthyReplica',
  'eventBatches',
  'blocksChanged',
];

function emptyCounters(policy: string): RouterCounters {
  const counters = { policy } as RouterCounters;
  for (const key of COUNTER_KEYS) counters[key] = 0;
  return counters;
}

/** The pool key of the backends whose model is not known. */
const UNKNOWN = '';

export class ModelPools {
  readonly #options: PoolsOptions;
  readonly #logger: Logger;
  readonly #pools = new Map<string, ModelPool>();
  readonly #pending = new Map<string, Pending>();
  /** Model or adapter name -> target; rebuilt after any change. */
  #index: Map<string, Target> | null = null;
  /** Callers waiting for a backend added cold to enter routing, by name. */
  readonly #activeWaiters = new Map<string, (() => void)[]>();
  #refreshing: Promise<void> | null = null;
  #refreshedAtMs = 0;
  #started = false;
  #closed = false;

  constructor(options: PoolsOptions) {
    this.#options = options;
    this.#logger = options.logger;
  }

  /**
   * Places the configured backends under their names (`backendNames`), routed at once (their
   * models read first, in parallel).
   */
  async addConfigured(configs: readonly BackendConfig[]): Promise<void> {
    const names = backendNames(configs);
    const backends = configs.map((c, i) => makeBackend(c, names[i]!));
    const cards = await Promise.all(backends.map((b) => readModelCards(b)));
    this.#refreshedAtMs = Date.now();
    backends.forEach((b, i) => {
      const served = servedModels(cards[i] ?? null, b.config.model);
      this.#warnIfNotConfigured(b, served, cards[i] ?? null);
      this.#place(b, served, { cold: false });
    });
  }

  /** Starts every pool's watches (the server is listening). */
  start(): void {
    this.#started = true;
    for (const pool of this.#pools.values()) pool.start();
  }

  /** The pool of `model` (null: the pool of unknown models), serving or not. */
  poolFor(model: string | null): ModelPool | undefined {
    return this.#pools.get(model ?? UNKNOWN);
  }

  /** Every pool, serving or not. */
  all(): ModelPool[] {
    return [...this.#pools.values()];
  }

  /** Pools that serve their model now (at least one backend in their router). */
  live(): ModelPool[] {
    return [...this.#pools.values()].filter((p) => p.activeCount > 0);
  }

  /**
   * Readiness (`GET /ready`): the models (pools with members) that have no healthy backend now;
   * empty when every one has one. `ready` is false too while no backend is placed at all.
   */
  readiness(): { ready: boolean; notReady: string[] } {
    const withMembers = [...this.#pools.values()].filter((p) => p.names.length > 0);
    const notReady = withMembers
      .filter((p) => p.healthyCount === 0)
      .map((p) => p.model ?? '(unknown)');
    return { ready: withMembers.length > 0 && notReady.length === 0, notReady };
  }

  /** The pool a single-model gateway has (the first live one): its router for callers. */
  get first(): ModelPool | undefined {
    return this.live()[0] ?? this.#pools.values().next().value;
  }

  /**
   * The pool and adapter of a request's `model`, as vLLM's `_check_model` would accept it: a
   * served name or a loaded adapter; none at all goes to the only model. Unknown: 404 with
   * vLLM's message (after asking the backends again, in case an adapter was just loaded).
   */
  async resolve(model: string | null): Promise<Target> {
    const hit = this.#lookup(model);
    if (hit) return hit;
    if (model && Date.now() - this.#refreshedAtMs >= UNKNOWN_MODEL_REFRESH_MS) {
      await this.refreshModels(0);
      const again = this.#lookup(model);
      if (again) return again;
    }
    if (this.live().length === 0) {
      throw new ApiError('ERR_NO_HEALTHY_BACKEND', 'no backend is serving yet');
    }
    throw new ApiError('ERR_MODEL_NOT_FOUND', `The model \`${model}\` does not exist.`, 'model');
  }

  /**
   * The pool and adapter of `model` when they are known now, without asking the backends; null
   * otherwise (then `resolve` asks, and says what is wrong). The generate path's fast path.
   */
  known(model: string | null): Target | null {
    try {
      return this.#lookup(model);
    } catch {
      return null;
    }
  }

  #lookup(model: string | null): Target | null {
    if (!model) {
      // Only a request without `model` needs the live pools listed (this runs per request).
      const live = this.live();
      if (live.length === 1) return { pool: live[0]!, adapter: null };
      if (live.length === 0) return null;
      const names = live.map((p) => p.model ?? '(unknown)').join(', ');
      throw new ApiError(
        'ERR_BAD_REQUEST',
        `The model field is required: this gateway serves several models (${names}).`,
        'model',
      );
    }
    const named = this.#names().get(model);
    if (named) return named;
    const unknown = this.#pools.get(UNKNOWN);
    return unknown && unknown.activeCount > 0 ? { pool: unknown, adapter: null } : null;
  }

  #names(): Map<string, Target> {
    if (this.#index) return this.#index;
    const index = new Map<string, Target>();
    for (const pool of this.live()) {
      if (pool.model === null) continue;
      for (const served of pool.served()) {
        for (const base of served.bases) {
          if (!index.has(base)) index.set(base, { pool, adapter: null });
        }
        for (const adapter of served.adapters.keys()) {
          if (!index.has(adapter)) index.set(adapter, { pool, adapter });
        }
      }
    }
    this.#index = index;
    return index;
  }

  /** `/v1/models`: every base model and adapter the live pools serve, vLLM's cards merged. */
  async listModels(): Promise<ModelCard[]> {
    await this.refreshModels(MODELS_MAX_AGE_MS);
    return mergeCards(this.live().flatMap((p) => p.served().map((s) => s.cards)));
  }

  /** Every backend: waiting to start, starting, active, down or draining. */
  backends(): BackendInfo[] {
    const pending: BackendInfo[] = [...this.#pending.values()].map((p) => ({
      name: p.backend.name,
      url: p.backend.config.url,
      events: p.backend.config.events,
      replay: p.backend.config.replay,
      model: p.backend.config.model,
      adapters: [],
      state: 'starting',
      inFlight: 0,
    }));
    return [...[...this.#pools.values()].flatMap((p) => p.backends()), ...pending];
  }

  /**
   * Adds a backend at run time. It starts cold: probed until it answers `/health`, its models
   * read, placed in its model's pool, scraped and subscribed, routed from its first report.
   * Throws ERR_CONFLICT when a backend of that name is already there (draining ones aside).
   */
  add(config: BackendConfig): BackendInfo {
    const name = replicaName(config.url);
    if (this.#pending.has(name) || this.#poolOf(name)) {
      throw new ApiError('ERR_CONFLICT', `backend ${name} is already in the gateway`, 'url');
    }
    const pending: Pending = { backend: makeBackend(config, name), cancelled: false, wake: null };
    this.#pending.set(name, pending);
    this.#logger.info({ replica: name, url: config.url }, 'backend added: starting cold');
    void this.#startCold(pending);
    return this.backends().find((b) => b.name === name && b.state === 'starting')!;
  }

  /**
   * Takes a backend out by name or URL: it drains. Returns its state now and a promise of its
   * close; null when there is no such backend.
   */
  remove(nameOrUrl: string): { info: BackendInfo; drained: Promise<void> } | null {
    const key = this.#nameOf(nameOrUrl);
    if (key === null) return null;
    const pending = this.#pending.get(key);
    if (pending) {
      const info = this.backends().find((b) => b.name === key)!;
      pending.cancelled = true;
      pending.wake?.();
      this.#pending.delete(key);
      return { info: { ...info, state: 'draining' }, drained: closeBackend(pending.backend) };
    }
    const pool = this.#poolOf(key)!;
    const before = pool.backends().find((b) => b.name === key && b.state !== 'draining')!;
    return { info: { ...before, state: 'draining' }, drained: this.#drain(pool, key) };
  }

  /**
   * Resolves true once the backend `name` routes (at once when it already does), false when
   * `timeoutMs` passes first or the gateway closes.
   */
  whenActive(name: string, timeoutMs: number): Promise<boolean> {
    if (this.backends().some((b) => b.name === name && b.state === 'active')) {
      return Promise.resolve(true);
    }
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      timer.unref();
      const waiters = this.#activeWaiters.get(name) ?? [];
      waiters.push(() => {
        clearTimeout(timer);
        resolve(true);
      });
      this.#activeWaiters.set(name, waiters);
    });
  }

  /** Reads every backend's models again, unless the last read is younger than `maxAgeMs`. */
  refreshModels(maxAgeMs: number): Promise<void> {
    if (this.#refreshing) return this.#refreshing;
    if (Date.now() - this.#refreshedAtMs < maxAgeMs) return Promise.resolve();
    this.#refreshedAtMs = Date.now();
    this.#refreshing = Promise.all(
      [...this.#pools.values()].flatMap((pool) => pool.names.map((n) => this.#reread(pool, n))),
    ).then(
      () => {
        this.#refreshing = null;
      },
      () => {
        this.#refreshing = null;
      },
    );
    return this.#refreshing;
  }

  /** `/router/replicas`: one pool's shape at the top (sums over pools), and each pool. */
  snapshot(nowMs: number) {
    const pools: PoolSnapshot[] = this.live().map((p) => p.snapshot(nowMs));
    const sum = (f: (p: PoolSnapshot) => number): number => pools.reduce((a, p) => a + f(p), 0);
    const replicas: PoolReplicaSnapshot[] = pools.flatMap((p) => p.replicas);
    const first = pools[0];
    const counters: RouterCounters = {
      ...(first?.counters ?? emptyCounters(this.#options.config.policy)),
    };
    for (const p of pools.slice(1)) {
      for (const key of COUNTER_KEYS) counters[key] += p.counters[key];
    }
    return {
      policy: first?.policy ?? this.#options.config.policy,
      indexMode: this.#options.config.index,
      indexedKeys: sum((p) => p.indexedKeys),
      overlayPredictions: sum((p) => p.overlayPredictions),
      inFlightRequests: sum((p) => p.inFlightRequests),
      replicas,
      counters,
      pools: pools.map(({ replicas: rs, ...rest }) => ({
        ...rest,
        replicas: rs.map((r) => r.name),
      })),
      ...(this.#options.central && { kvEventsBind: this.#options.central.stats() }),
    };
  }

  /** Per-replica load for the gateway's gauges, labelled by model. */
  replicaLoads(): ReplicaLoad[] {
    return [...this.#pools.values()].flatMap((p) =>
      p.router.snapshot().replicas.map((r) => ({
        name: r.name,
        model: p.model ?? '',
        queuedPromptTokens: r.queuedPromptTokens,
        inFlight: r.inFlight,
        up: r.healthy,
        tokenizer: agreementOf(p, r.name),
      })),
    );
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#activeWaiters.clear();
    for (const p of this.#pending.values()) {
      p.cancelled = true;
      p.wake?.();
    }
    await Promise.all([
      ...[...this.#pending.values()].map((p) => closeBackend(p.backend)),
      ...[...this.#pools.values()].map((p) => p.close()),
    ]);
    await this.#options.central?.close();
    this.#pending.clear();
  }

  #poolOf(name: string): ModelPool | undefined {
    for (const pool of this.#pools.values()) if (pool.has(name)) return pool;
    return undefined;
  }

  #nameOf(nameOrUrl: string): string | null {
    if (this.#pending.has(nameOrUrl) || this.#poolOf(nameOrUrl)) return nameOrUrl;
    const url = nameOrUrl.replace(/\/+$/, '');
    for (const b of this.backends()) {
      if (b.url === url && b.state !== 'draining') return b.name;
    }
    return null;
  }

  /** The pool for a backend's models: one that knows any of its base names, or a new one. */
  #place(backend: Backend, served: ServedModels, options: { cold: boolean }): void {
    let pool: ModelPool | undefined;
    const configured = backend.config.model;
    if (served.bases.length === 0) pool = this.#pools.get(UNKNOWN);
    else if (configured !== null) {
      // Its entry names its model: that name alone places it, never the engine's own id.
      pool = this.#pools.get(configured);
      if (!pool) for (const p of this.#pools.values()) if (p.knows(configured)) pool = p;
    } else for (const p of this.#pools.values()) if (served.bases.some((b) => p.knows(b))) pool = p;
    if (!pool) {
      const model = served.bases[0] ?? null;
      pool = new ModelPool({
        model,
        config: this.#options.config,
        tokenizer: this.#options.tokenizerFor(model),
        tokenize: this.#options.tokenize,
        ...(this.#options.onRemoteFallback && { onRemoteFallback: this.#options.onRemoteFallback }),
        ...(this.#options.observer && { observer: this.#options.observer }),
        central: this.#options.central ?? null,
        logger: this.#logger,
        onBackendUp: (name) => void this.#reread(pool!, name),
        onBackendActive: (name) => {
          for (const wake of this.#activeWaiters.get(name) ?? []) wake();
          this.#activeWaiters.delete(name);
        },
      });
      this.#pools.set(model ?? UNKNOWN, pool);
      if (this.#started) pool.start();
    }
    pool.addBackend(backend, served, options);
    this.#index = null;
  }

  async #startCold(p: Pending): Promise<void> {
    let delayMs = HEALTH_BACKOFF_START_MS;
    while (!p.cancelled && !this.#closed) {
      if (await probeHealth(p.backend)) {
        const cards = await readModelCards(p.backend);
        if (p.cancelled || this.#closed) return;
        this.#pending.delete(p.backend.name);
        const served = servedModels(cards, p.backend.config.model);
        this.#warnIfNotConfigured(p.backend, served, cards);
        this.#place(p.backend, served, { cold: true });
        return;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delayMs);
        timer.unref();
        p.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      p.wake = null;
      // Never answered yet: at least once a second, so it routes within a second of coming up.
      delayMs = nextProbeDelayMs(delayMs, false);
    }
  }

  /** Asks a member for its models again; moves it when it now serves another base model. */
  async #reread(pool: ModelPool, name: string): Promise<void> {
    const backend = pool.backendOf(name);
    if (!backend) return;
    const cards = await readModelCards(backend);
    if (cards === null || pool.backendOf(name) !== backend) return;
    const configured = backend.config.model;
    const served = servedModels(cards, configured);
    const before = pool.servedOf(name)?.reported ?? [];
    if (configured !== null && !sameIds(before, served.reported)) {
      this.#logger.warn(
        { replica: name, model: configured, from: before, to: served.reported },
        "the engine reports another model id now; it stays in its entry's model pool (model=)",
      );
    }
    const belongs =
      configured !== null ||
      (pool.model === null ? served.bases.length === 0 : served.bases.some((b) => pool.knows(b)));
    if (belongs) {
      pool.updateServed(name, served);
      this.#index = null;
      return;
    }
    this.#logger.warn(
      { replica: name, from: pool.model, to: served.bases[0] ?? null },
      'backend serves another model now: it moves to that model pool, cold',
    );
    void this.#drain(pool, name);
    this.#place(makeBackend(backend.config, name), served, { cold: true });
  }

  /** Drains a member; drops its pool once nothing is left in it. */
  async #drain(pool: ModelPool, name: string): Promise<void> {
    const drained = pool.removeBackend(name);
    this.#index = null;
    await drained;
    if (
      pool.openCount === 0 &&
      pool.names.length === 0 &&
      this.#pools.get(pool.model ?? UNKNOWN) === pool
    ) {
      this.#pools.delete(pool.model ?? UNKNOWN);
      this.#index = null;
    }
  }

  #warnIfNotConfigured(backend: Backend, served: ServedModels, cards: ModelCard[] | null): void {
    const configured = backend.config.model;
    if (cards === null || configured === null || served.reported.includes(configured)) return;
    this.#logger.warn(
      { replica: backend.name, configured, reports: served.reported },
      "the engine's /v1/models names its model otherwise: its entry's name (model=) is the one it is served under; the engine's ids answer too",
    );
  }
}

function sameIds(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((id, i) => id === b[i]);
}

function agreementOf(pool: ModelPool, name: string): TokenizerAgreement {
  const backend = pool.backendOf(name);
  return backend ? pool.checker.agreement(backend) : 'unknown';
}
