/**
 * `LlamaCppEngine`: the engine core (scheduler and block pool, unchanged) with the llama.cpp
 * runtime executing its plans. A step is schedule -> execute (async, measured) -> complete; the
 * core's KV events and counters are those of the sim engine, with the pool's cache claims kept
 * to what the sequences physically hold (the runtime uncaches what they lost). Emitted tokens
 * carry the sampled ids.
 */
import type { LlamaModel } from 'node-llama-cpp';
import { EngineCore } from '../../core.ts';
import type { EngineConfig, EngineCounters, EngineRequest, StepResult } from '../../types.ts';
import { type ExecutedStep, LlamaCppRuntime, type PlacementCounts } from './runtime.ts';

export interface LlamaCppEngineOptions {
  model: LlamaModel;
  threads: number;
  /** KV positions per sequence (the context window). */
  contextTokens: number;
  /** Idle sequences kept beside the `maxSeqs` running ones (default: maxSeqs). */
  cacheSequences?: number;
  /** Sees every executed step with its plan (tests compare the two). */
  onStep?: (result: StepResult, executed: ExecutedStep) => void;
  traceTokens?: boolean;
}

export class LlamaCppEngine {
  readonly #core: EngineCore;
  readonly #runtime: LlamaCppRuntime;
  readonly #onStep: LlamaCppEngineOptions['onStep'];

  private constructor(core: EngineCore, runtime: LlamaCppRuntime, options: LlamaCppEngineOptions) {
    this.#core = core;
    this.#runtime = runtime;
    this.#onStep = options.onStep;
  }

  static async create(
    config: EngineConfig,
    options: LlamaCppEngineOptions,
  ): Promise<LlamaCppEngine> {
    const sequences = config.maxSeqs + (options.cacheSequences ?? config.maxSeqs);
    const kvBlocks =
      config.kvBlocks ?? Math.floor((sequences * options.contextTokens) / config.blockSize);
    const core = new EngineCore({ ...config, kvBlocks });
    const runtime = await LlamaCppRuntime.create({
      model: options.model,
      sequences,
      contextTokens: options.contextTokens,
      batchTokens: config.budgetTokens,
      threads: options.threads,
      blockSize: config.blockSize,
      traceTokens: options.traceTokens ?? false,
    });
    return new LlamaCppEngine(core, runtime, options);
  }

  get kvBlocksTotal(): number {
    return this.#core.kvBlocksTotal;
  }

  add(req: EngineRequest): void {
    this.#core.add(req);
    this.#runtime.register(req);
  }

  abort(id: string): void {
    if (this.#core.abort(id)) this.#runtime.forget(id);
  }

  hasWork(): boolean {
    return this.#core.hasWork();
  }

  counters(): EngineCounters {
    return this.#core.counters();
  }

  /** How admissions found their cached prefix (in place, copied, cold). */
  placements(): PlacementCounts {
    return this.#runtime.counts();
  }

  cachedBlockKeys(): number[] {
    return this.#core.cachedBlockKeys();
  }

  /** One step on llama.cpp: the scheduler's plan, run as one batch, applied. */
  async step(): Promise<StepResult> {
    const plan = this.#core.schedule();
    const executed = await this.#runtime.execute(plan, (keys) => this.#core.uncache(keys));
    const result = this.#core.complete(plan, executed.durationMs);
    for (const token of result.emitted) {
      const id = executed.sampled.get(token.id);
      if (id === undefined) throw new Error(`${token.id}: emitted without a sampled token`);
      token.tokenId = id;
    }
    for (const fin of result.finished) this.#runtime.forget(fin.id);
    this.#onStep?.(result, executed);
    return result;
  }

  dispose(): Promise<void> {
    return this.#runtime.dispose();
  }
}
