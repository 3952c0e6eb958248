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
import { kvPoolTokens, type ReplicaSpec } from '../model/cost.ts';
import { Scheduler } from '../scheduler/scheduler.ts';
import type { StepPlan } from '../scheduler/types.ts';
import { simStepMs } from './runtime/sim.ts';
import { AdapterCache, loraLoadMs, type ResolvedLoraConfig, resolveLoraConfig } from './lora.ts';
import {
  type EngineConfig,
  type EngineCounters,
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
  /** Adapter load time of the scheduled step (LoRA). */
  #pendingLoadMs = 0;

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
    this.#pool = new BlockPool({
      numBlocks: kvBlocks,
      blockSize,
      enableCaching: config.prefixCaching ?? true,
    });
    const lora = config.lora ? resolveLoraConfig(config.lora) : null;
    this.#scheduler = new Scheduler(
      lora ? { ...config, maxLoras: lora.maxLoras } : config,
      this.#pool,
    );
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
    this.#scheduler.add({
      id: req.id,
      promptTokens: tokens.length,
      maxNewTokens: req.maxNewTokens,
      priority: req.priority ?? 0,
      arrivalMs: req.arrivalMs,
      ...(req.loraName && { loraName: req.loraName }),
      ...(this.#pool.cachingEnabled && {
        tokenIds: compactTokens(tokens),
        blockKeys: req.blockKeys ?? computeBlockKeys(tokens, this.#pool.blockSize, scope),
        cacheSalt: req.cacheSalt,
      }),
    });
  }

  /** Drops a queued or running request and frees its KV now; false when it is unknown. */
  abort(id: string): boolean {
    const record = this.#scheduler.abort(id);
    if (record !== null) this.#aborted.push(record);
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
    const plan = this.#scheduler.schedule();
    // Before complete(): a request that finishes in this step is gone after it.
    this.#pendingLoadMs =
      this.#lora && plan.admitted.length > 0 ? this.#loadAdapters(plan.admitted) : 0;
    return plan;
  }

  /** The cost model's duration of a scheduled plan (the sim runtime's clock). */
  modeledStepMs(plan: StepPlan): number {
    return simStepMs(this.#spec, plan, this.#pendingLoadMs);
  }

  /** Applies the plan the last `schedule()` returned, once it ran for `durationMs`. */
  complete(plan: StepPlan, durationMs: number): StepResult {
    const { emitted, finished } = this.#scheduler.complete(plan);
    this.#pendingLoadMs = 0;
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
      events: this.#pool.takeEvents(),
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
      prefixCacheHitsTokens: c.prefixHitsTokens,
      preemptions: c.preemptions,
      promptTokens: c.promptTokens,
      generationTokens: c.generationTokens,
      ...(this.#lora && { lora: this.#loraCounters() }),
    };
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

  /** Events recorded outside a step (by `reset`), for a driver that publishes them at once. */
  takeEvents(): StepResult['events'] {
    return this.#pool.takeEvents();
  }

  /** Prompt tokens served from the prefix cache at the request's (last) admission. */
  cachedTokensOf(id: string): number | undefined {
    return this.#scheduler.cachedTokensOf(id);
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
