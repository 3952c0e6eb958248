/**
 * The engine core: scheduler + paged block pool + the cost model's mixed-step time. A driver
 * (the engine server on the wall clock, the simulator on a virtual clock) calls `step()` and
 * advances its own clock by `durationMs`; the core has no clock, no randomness and no I/O.
 */
import { type BlockKey, computeBlockKeys } from '../kv/blockKey.ts';
import { BlockPool } from '../kv/blockPool.ts';
import { kvPoolTokens, mixedStepMs, type ReplicaSpec } from '../model/cost.ts';
import { Scheduler } from '../scheduler/scheduler.ts';
import {
  type EngineConfig,
  type EngineCounters,
  EngineError,
  type EngineRequest,
  type RequestFinished,
  type StepResult,
} from './types.ts';

export class EngineCore {
  readonly #spec: ReplicaSpec;
  readonly #pool: BlockPool;
  readonly #scheduler: Scheduler;
  /** Aborts since the last step: reported in the next step's `finished`. */
  #aborted: RequestFinished[] = [];

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
    this.#scheduler = new Scheduler(config, this.#pool);
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
      ...(this.#pool.cachingEnabled && {
        tokenIds: compactTokens(tokens),
        blockKeys: req.blockKeys ?? computeBlockKeys(tokens, this.#pool.blockSize, scope),
        cacheSalt: req.cacheSalt,
        loraName: req.loraName,
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
    const plan = this.#scheduler.schedule();
    const { emitted, finished } = this.#scheduler.complete(plan);
    let allFinished: RequestFinished[] = finished;
    if (this.#aborted.length > 0) {
      allFinished = this.#aborted.concat(finished);
      this.#aborted = [];
    }
    return {
      plan,
      durationMs: mixedStepMs(this.#spec, plan),
      prefillTokens: plan.prefillTokens,
      decodeTokens: plan.decodeTokens,
      emitted,
      finished: allFinished,
      preempted: plan.preempted,
      events: this.#pool.takeEvents(),
    };
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
