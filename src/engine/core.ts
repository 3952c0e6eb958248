/**
 * The engine core: scheduler + paged block pool + the cost model's mixed-step time. A driver
 * (the engine server on the wall clock, the simulator on a virtual clock) calls `step()` and
 * advances its own clock by `durationMs`; the core has no clock, no randomness and no I/O.
 * With a LoRA config, at most `maxLoras` adapters run in one step (the scheduler's rule) and a
 * step that admits a request for an adapter that is not resident takes its load time longer
 * (lora.ts).
 */
import { type BlockKey, computeBlockKeys } from '../kv/blockKey.ts';
import { BlockPool } from '../kv/blockPool.ts';
import { kvBytesPerToken, kvPoolTokens, type ReplicaSpec } from '../model/cost.ts';
import { Scheduler } from '../scheduler/scheduler.ts';
import { NixlConnectorCore } from './connector/nixl.ts';
import { DEFAULT_CPU_KV_GBPS, OffloadingConnectorCore } from './connector/offloading.ts';
import type { StepPlan } from '../scheduler/types.ts';
import { simStepMs } from './runtime/sim.ts';
import { AdapterCache, loraLoadMs, type ResolvedLoraConfig, resolveLoraConfig } from './lora.ts';
import {
  type EngineConfig,
  type EngineCounters,
  type EngineCpuOffloadCounters,
  EngineError,
  type EngineLoraCounters,
  type EngineRequest,
  type RequestFinished,
  type StepResult,
} from './types.ts';

interface LoraState {
  config: ResolvedLoraConfig;
  adapters: AdapterCache;
  /** Load time of one adapter. */
  loadMs: number;
  /** Adapters loaded by steps so far. */
  loads: number;
}

export class EngineCore {
  readonly #spec: ReplicaSpec;
  readonly #pool: BlockPool;
  readonly #scheduler: Scheduler;
  /** Aborts since the last step: reported in the next step's `finished`. */
  #aborted: RequestFinished[] = [];
  readonly #lora: LoraState | null = null;
  /** The KV connector beside the pool (P/D); null without --kv-transfer-config. */
  readonly #connector: NixlConnectorCore | null = null;
  /** Remote-decode requests: their keys and prompt length, for the hold at their finish. */
  readonly #remoteDecode = new Map<
    string,
    { keys: readonly BlockKey[]; promptTokens: number; client: string }
  >();
  /** Remote-prefill requests: tokens written from the pull, until they finish. */
  readonly #external = new Map<string, number>();
  #externalTokens = 0;
  /**
   * CPU tier: the connector's prefix-cache queries and hits, tokens (vLLM's
   * connector_prefix_cache_stats); its hits are left out of the GPU prefix cache's.
   */
  #cpuQueriesTokens = 0;
  #cpuHitsTokens = 0;
  /** Adapter load time of the scheduled step (LoRA), and CPU-tier reloads. */
  #pendingLoadMs = 0;
  /** The CPU tier (OffloadingConnector); null without one. */
  readonly #offload: OffloadingConnectorCore | null = null;

  constructor(config: EngineConfig) {
    const { blockSize } = config;
    if (!Number.isInteger(blockSize) || blockSize < 1) {
      throw new EngineError('ERR_CONFIG', `blockSize must be an integer >= 1, got ${blockSize}`);
    }
    const kvBlocks = config.kvBlocks ?? Math.floor(kvPoolTokens(config.spec) / blockSize);
    if (!Number.isInteger(kvBlocks) || kvBlocks < 1) {
      throw new EngineError('ERR_CONFIG', `kvBlocks must be an integer >= 1, got ${kvBlocks}`);
    }
    this.#spec = config.spec;
    const offload = config.cpuOffload;
    const gbps = offload?.cpuKvGbps ?? DEFAULT_CPU_KV_GBPS;
    if (offload) {
      if (!(gbps > 0 && Number.isFinite(gbps))) {
        throw new EngineError('ERR_CONFIG', `cpuKvGbps must be a number > 0, got ${gbps}`);
      }
      if (!Number.isInteger(offload.cpuBlocks) || offload.cpuBlocks < 0) {
        throw new EngineError(
          'ERR_CONFIG',
          `cpuBlocks must be an integer >= 0, got ${offload.cpuBlocks}`,
        );
      }
    }
    this.#pool = new BlockPool({
      numBlocks: kvBlocks,
      blockSize,
      enableCaching: config.prefixCaching ?? true,
      cpuBlocks: offload?.cpuBlocks ?? 0,
    });
    const lora = config.lora ? resolveLoraConfig(config.lora) : null;
    this.#scheduler = new Scheduler(
      lora ? { ...config, maxLoras: lora.maxLoras } : config,
      this.#pool,
    );
    if (config.kvTransfer) {
      this.#connector = new NixlConnectorCore(
        this.#pool,
        config.kvTransfer.abortTimeoutMs,
        config.kvTransfer,
      );
    }
    if (offload) {
      const bytes = kvBytesPerToken(config.spec.model, config.spec.kvDtype);
      this.#offload = new OffloadingConnectorCore(this.#pool, bytes, gbps);
    }
    if (lora) {
      this.#lora = {
        config: lora,
        adapters: new AdapterCache(lora.maxCpuLoras),
        loadMs: loraLoadMs(config.spec.model, lora),
        loads: 0,
      };
    }
  }

  /** The LoRA config in force, null when LoRA is off. */
  get lora(): Readonly<ResolvedLoraConfig> | null {
    return this.#lora?.config ?? null;
  }

  /** Modelled time to load one adapter that is not resident (0 when LoRA is off). */
  get loraLoadMs(): number {
    return this.#lora?.loadMs ?? 0;
  }

  get blockSize(): number {
    return this.#pool.blockSize;
  }

  get kvBlocksTotal(): number {
    return this.#pool.numBlocks;
  }

  /** Queues a request; throws EngineError (ERR_INVALID_REQUEST, ERR_DUPLICATE_ID, ERR_NEVER_FITS). */
  add(req: EngineRequest): void {
    if (typeof req.id !== 'string' || req.id.length === 0) {
      throw new EngineError('ERR_INVALID_REQUEST', 'request id must be a non-empty string');
    }
    if (!Number.isFinite(req.arrivalMs) || !Number.isFinite(req.priority ?? 0)) {
      throw new EngineError(
        'ERR_INVALID_REQUEST',
        `${req.id}: arrivalMs and priority must be finite`,
      );
    }
    const tokens = req.promptTokens;
    if (tokens === undefined || tokens === null || !(tokens.length >= 1)) {
      throw new EngineError('ERR_INVALID_REQUEST', `${req.id}: prompt must have at least 1 token`);
    }
    const scope = { cacheSalt: req.cacheSalt, loraName: req.loraName };
    const tokenIds = this.#pool.cachingEnabled ? compactTokens(tokens) : null;
    const blockKeys =
      tokenIds === null
        ? null
        : (req.blockKeys ?? computeBlockKeys(tokens, this.#pool.blockSize, scope));
    this.#scheduler.add({
      id: req.id,
      promptTokens: tokens.length,
      maxNewTokens: req.maxNewTokens,
      priority: req.priority ?? 0,
      arrivalMs: req.arrivalMs,
      ...(req.handle !== undefined && { handle: req.handle }),
      ...(req.loraName && { loraName: req.loraName }),
      ...(tokenIds !== null && { tokenIds, blockKeys: blockKeys!, cacheSalt: req.cacheSalt }),
    });
    if (this.#offload !== null && tokenIds !== null) {
      this.#offload.add(req.id, blockKeys!, tokenIds, scope);
    }
    const connector = this.#connector;
    if (connector === null || req.kvTransfer === undefined) return;
    if (req.kvTransfer === 'remote-decode') {
      this.#remoteDecode.set(req.id, {
        keys: blockKeys ?? [],
        promptTokens: tokens.length,
        client: req.transferClient ?? '',
      });
    } else if (tokenIds !== null) {
      const external = connector.inject(req.id, blockKeys!, tokenIds, scope);
      if (external > 0) this.#external.set(req.id, external);
    }
  }

  /** Prompt tokens of a remote-prefill request written from its pull (0 if none). */
  externalTokensOf(id: string): number {
    return this.#external.get(id) ?? 0;
  }

  /**
   * Producer: the consumer pulled `requestId`'s blocks (`blockIds`, when given, must be the ones
   * held): they are freed. False when they are not held (pulled, expired or never held).
   */
  releaseTransfer(requestId: string, blockIds?: readonly number[]): boolean {
    const c = this.#connector;
    if (c === null || !c.isHeld(requestId, blockIds)) return false;
    return c.release(requestId);
  }

  /** Producer: whether `requestId`'s blocks (exactly `blockIds`, when given) are held. */
  isTransferHeld(requestId: string, blockIds?: readonly number[]): boolean {
    return this.#connector?.isHeld(requestId, blockIds) ?? false;
  }

  /** Producer: frees holds past the abort timeout (call after each step); returns how many. */
  expireTransfers(nowMs: number): number {
    return this.#connector?.expire(nowMs) ?? 0;
  }

  /** Drops a queued or running request and frees its KV now; false when it is unknown. */
  abort(id: string): boolean {
    const record = this.#scheduler.abort(id);
    if (record !== null) this.#aborted.push(this.#settleTransfer(record));
    this.#offload?.admitted(id);
    return record !== null;
  }

  /** Schedules and applies one step; the caller advances its clock by `durationMs`. */
  step(): StepResult {
    const plan = this.schedule();
    return this.complete(plan, this.modeledStepMs(plan));
  }

  /**
   * The next step's plan, for a runtime to execute before `complete(plan, durationMs)` applies
   * it (`step()` is the two with the cost model's duration). Nothing else may be scheduled in
   * between; requests may be added and aborted.
   */
  schedule(): StepPlan {
    this.#offload?.retryWaiting();
    const plan = this.#scheduler.schedule();
    // Before complete(): a request that finishes in this step is gone after it.
    this.#pendingLoadMs =
      this.#lora && plan.admitted.length > 0 ? this.#loadAdapters(plan.admitted) : 0;
    if (this.#offload !== null) {
      for (const id of plan.admitted) {
        const hit = this.#offload.admitted(id, this.#scheduler.cachedTokensOf(id) ?? 0);
        if (hit !== null) {
          this.#cpuQueriesTokens += hit.queriesTokens;
          this.#cpuHitsTokens += hit.hitsTokens;
        }
      }
      this.#pendingLoadMs += this.#offload.takePendingMs();
    }
    return plan;
  }

  /** The cost model's duration of a scheduled plan (the sim runtime's clock). */
  modeledStepMs(plan: StepPlan): number {
    if (this.#spec.calibration?.table?.msPerPromptSample === undefined) {
      return simStepMs(this.#spec, plan, this.#pendingLoadMs);
    }
    // A step table that charges a prompt's sampling chunk: count the chunks ending a prompt.
    let promptSamples = 0;
    for (const e of plan.entries) {
      if (e.kind !== 'prefill') continue;
      const prompt = this.#scheduler.promptTokensOf(e.id);
      if (prompt !== undefined && e.contextTokens + e.tokens >= prompt) promptSamples++;
    }
    return simStepMs(this.#spec, { ...plan, promptSamples }, this.#pendingLoadMs);
  }

  /** Applies the plan the last `schedule()` returned, once it ran for `durationMs`. */
  complete(plan: StepPlan, durationMs: number): StepResult {
    const outcome = this.#scheduler.complete(plan);
    this.#pendingLoadMs = 0;
    const { emitted } = outcome;
    let finished: RequestFinished[] = outcome.finished;
    if (this.#connector !== null) {
      // The pulled blocks are the scheduler's now: the connector lets go of them.
      for (const id of plan.admitted) this.#externalTokens += this.#connector.admitted(id);
      finished = finished.map((f) => this.#settleTransfer(f));
    }
    let allFinished: RequestFinished[] = finished;
    if (this.#aborted.length > 0) {
      allFinished = this.#aborted.concat(finished);
      this.#aborted = [];
    }
    return {
      plan,
      durationMs,
      prefillTokens: plan.prefillTokens,
      decodeTokens: plan.decodeTokens,
      emitted,
      finished: allFinished,
      preempted: plan.preempted,
      events: this.takeEvents(),
    };
  }

  /**
   * Drops from the prefix cache the keys among `keys` that no running request holds (a
   * runtime lost their physical copy): BlockRemoved in the next step's events.
   */
  uncache(keys: Iterable<BlockKey>): number {
    return this.#pool.uncache(keys);
  }

  hasWork(): boolean {
    return this.#scheduler.hasWork();
  }

  counters(): EngineCounters {
    const c = this.#scheduler.counters();
    const pool = this.#pool;
    return {
      running: c.running,
      waiting: c.waiting,
      kvUsage: pool.usage,
      kvBlocksTotal: pool.numBlocks,
      kvBlocksFree: pool.freeBlocks,
      prefixCacheQueriesTokens: c.prefixQueriesTokens,
      prefixCacheHitsTokens: c.prefixHitsTokens - this.#cpuHitsTokens,
      preemptions: c.preemptions,
      promptTokens: c.promptTokens,
      generationTokens: c.generationTokens,
      ...(this.#lora && { lora: this.#loraCounters() }),
      ...(this.#offload && { cpuOffload: this.#offloadCounters() }),
      ...(this.#connector && {
        prefixCacheHitsTokens: c.prefixHitsTokens - this.#cpuHitsTokens - this.#externalTokens,
        kvTransfer: {
          heldRequests: this.#connector.heldRequests,
          heldBlocks: this.#connector.heldBlocks,
          expiredHolds: this.#connector.expiredHolds,
          refusedHolds: this.#connector.refusedHolds,
          externalTokens: this.#externalTokens,
          injectedBlocks: this.#connector.injectedBlocks,
        },
      }),
    };
  }

  /**
   * A finished request's transfer: a remote decode's blocks are held (when it ended at its
   * length, as vLLM's request_finished), a remote prefill's pulled tokens leave its cached count.
   */
  #settleTransfer(f: RequestFinished): RequestFinished {
    const connector = this.#connector;
    if (connector === null) return f;
    const remote = this.#remoteDecode.get(f.id);
    if (remote !== undefined) {
      this.#remoteDecode.delete(f.id);
      if (f.reason !== 'length') return f;
      const held = connector.hold(f.id, remote.keys, remote.promptTokens, remote.client);
      return held === null ? f : { ...f, heldBlockIds: held };
    }
    const external = this.#external.get(f.id);
    if (external === undefined) return f;
    this.#external.delete(f.id);
    // Aborted before admission: the connector still holds the pulled blocks.
    connector.admitted(f.id);
    return { ...f, cachedTokens: Math.max(0, f.cachedTokens - external) };
  }

  /**
   * Loads an adapter now (vLLM's add_lora at startup or from the runtime API), outside any step.
   * Refused (ERR_CONFIG) when LoRA is off.
   */
  loadAdapter(name: string): void {
    const lora = this.#requireLora();
    lora.adapters.touch(name, this.#scheduler.loraCounts().running);
  }

  /** Drops an adapter from the resident set; false when it was not resident. */
  unloadAdapter(name: string): boolean {
    return this.#requireLora().adapters.remove(name);
  }

  #requireLora(): LoraState {
    if (this.#lora === null) throw new EngineError('ERR_CONFIG', 'LoRA is not enabled');
    return this.#lora;
  }

  /** Total load time of the adapters the admitted requests need and are not resident. */
  #loadAdapters(admitted: readonly string[]): number {
    const lora = this.#lora!;
    let inUse: ReadonlyMap<string, number> | null = null;
    let ms = 0;
    for (const id of admitted) {
      const name = this.#scheduler.loraOf(id);
      if (name === null) continue;
      inUse ??= this.#scheduler.loraCounts().running;
      if (lora.adapters.touch(name, inUse)) {
        ms += lora.loadMs;
        lora.loads++;
      }
    }
    return ms;
  }

  #offloadCounters(): EngineCpuOffloadCounters {
    const offload = this.#offload!;
    const tier = offload.tier;
    return {
      cpuBlocksTotal: tier.capacityBlocks,
      cpuBlocksUsed: tier.size,
      storedBlocks: tier.storedBlocks,
      loadedBlocks: tier.loadedBlocks,
      evictedBlocks: tier.evictedBlocks,
      loadedTokens: offload.loadedTokens,
      externalQueriesTokens: this.#cpuQueriesTokens,
      externalHitsTokens: this.#cpuHitsTokens,
      loadedBytes: offload.loadedTokens * offload.kvBytesPerToken,
      storedBytes: tier.storedBlocks * this.#pool.blockSize * offload.kvBytesPerToken,
    };
  }

  /** Block keys the CPU tier holds now, least recent first (empty without one). */
  cpuBlockKeys(): BlockKey[] {
    return this.#pool.cpuTierKeys();
  }

  #loraCounters(): EngineLoraCounters {
    const lora = this.#lora!;
    const counts = this.#scheduler.loraCounts();
    return {
      maxLoras: lora.config.maxLoras,
      running: [...counts.running.keys()],
      waiting: [...counts.waiting.keys()],
      resident: lora.adapters.names(),
      loads: lora.loads,
    };
  }

  /**
   * Clears the prefix cache (an AllBlocksCleared event in the next step's or `takeEvents`'s
   * output). Refused (false) while any request holds KV.
   */
  reset(): boolean {
    return this.#pool.resetCache();
  }

  /** A fault: the prefix cache is emptied with no event (see `server/faults.ts`). */
  forgetCacheSilently(): number {
    return this.#pool.forgetAllSilently();
  }

  /** Events recorded outside a step (by `reset`), for a driver that publishes them at once. */
  takeEvents(): StepResult['events'] {
    return this.#offload !== null ? this.#offload.takeEvents() : this.#pool.takeEvents();
  }

  /** Prompt tokens served from the prefix cache at the request's (last) admission. */
  cachedTokensOf(id: string): number | undefined {
    const cached = this.#scheduler.cachedTokensOf(id);
    return cached === undefined ? undefined : Math.max(0, cached - this.externalTokensOf(id));
  }

  /** Leading prompt tokens the prefix cache holds now for these keys (a pull's local part). */
  cachedPrefixTokens(blockKeys: readonly BlockKey[]): number {
    return (
      this.#pool.findCachedPrefix(blockKeys, blockKeys.length).blockIds.length *
      this.#pool.blockSize
    );
  }

  /** Block keys the prefix cache holds now (a copy; for checks against the event stream). */
  cachedBlockKeys(): BlockKey[] {
    return this.#pool.cachedKeys();
  }
}

/**
 * The prompt's token ids as an Int32Array: given one, kept as is; else a copy when every id is
 * an int32 (the usual case), else the array as given. A request holds its ids until it finishes; a typed copy keeps them off the JS heap,
 * so long-lived prompts do not get copied by every young-generation collection.
 */
function compactTokens(tokens: readonly number[] | Int32Array): ArrayLike<number> {
  if (tokens instanceof Int32Array) return tokens;
  const out = new Int32Array(tokens.length);
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    // -0 would come back as 0: keep such a prompt as given.
    if ((t | 0) !== t || (t === 0 && 1 / t < 0)) return tokens;
    out[i] = t;
  }
  return out;
}
