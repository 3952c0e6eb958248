/**
 * The llama.cpp runtime: executes the scheduler's plan for one step as one forward pass over
 * real KV caches, and samples the tokens the plan says are due.
 *
 * One llama.cpp context with `sequences` sequences of `contextTokens` each; a running request
 * owns one (sequences.ts says which and why). Per step: preempted requests give their sequence
 * back; each admitted request gets a sequence holding exactly its cached prefix (kept in place,
 * or copied from another sequence by state save and load); keys no sequence holds any more are
 * handed to `uncache` (the pool must not claim them); then every entry's evaluation is queued in
 * the same turn (`controlledEvaluate` with the entry's tokens, the last one sampling when the
 * entry ends the known tokens), and the batching strategy runs them as one batch. The step's
 * duration is measured, placement included.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type {
  ControlledEvaluateInputItem,
  LlamaContext,
  LlamaContextSequence,
  LlamaModel,
  Token,
} from 'node-llama-cpp';
import { type BlockKey, computeBlockKeys } from '../../../kv/blockKey.ts';
import type { StepPlan } from '../../../scheduler/types.ts';
import { type EngineRequest, EngineError, type SamplingParams } from '../../types.ts';
import { PlanBatching, type RecordedBatch } from './batching.ts';
import { type Placement, SequenceMap } from './sequences.ts';
import { samplerOptions } from './samplerOptions.ts';

export interface LlamaCppRuntimeOptions {
  model: LlamaModel;
  /** llama.cpp sequences: running requests at most, plus idle ones that keep KV as a cache. */
  sequences: number;
  /** KV positions per sequence (the context window). */
  contextTokens: number;
  /** Most tokens one forward pass takes (>= the scheduler's budget). */
  batchTokens: number;
  threads: number;
  blockSize: number;
  /** Record every batch item's token ids in the step traces (tests). */
  traceTokens?: boolean;
}

/** What one executed step did. */
export interface ExecutedStep {
  durationMs: number;
  /** Of it, placing the admitted requests (state copies, erasures) before the forward pass. */
  placementMs: number;
  /** The token sampled for each request whose entry ended its known tokens. */
  sampled: Map<string, number>;
  /** Each entry's input tokens, in plan order. */
  inputs: { id: string; tokens: number[] }[];
  /** The batches llama.cpp was asked to run during the step (one, when lockstep held). */
  batches: RecordedBatch[];
}

/** How admitted requests found their cached prefix, counted over the runtime's life. */
export interface PlacementCounts {
  /** Admissions with a cached prefix kept in an idle sequence. */
  inPlace: number;
  /** Admissions whose cached prefix was copied from another sequence. */
  copied: number;
  /** Admissions with nothing cached. */
  cold: number;
  /** Keys handed back to the pool because no sequence held them any more. */
  uncached: number;
}

interface RequestState {
  /** Prompt, then each sampled token. */
  tokens: number[];
  keys: BlockKey[];
  sampling: SamplingParams;
  /** Tokens whose KV its sequence holds. */
  computed: number;
}

export class LlamaCppRuntime {
  readonly #context: LlamaContext;
  readonly #seqs: LlamaContextSequence[];
  readonly #map: SequenceMap;
  readonly #batching: PlanBatching;
  readonly #blockSize: number;
  readonly #requests = new Map<string, RequestState>();
  /** Requests that left during a step: their sequence is released once it ends. */
  readonly #leaving = new Set<string>();
  readonly #stateDir: string;
  readonly #counts: PlacementCounts = { inPlace: 0, copied: 0, cold: 0, uncached: 0 };
  #inFlight = false;
  #copies = 0;

  private constructor(
    context: LlamaContext,
    batching: PlanBatching,
    options: LlamaCppRuntimeOptions,
  ) {
    this.#context = context;
    this.#batching = batching;
    this.#blockSize = options.blockSize;
    this.#seqs = Array.from({ length: options.sequences }, () => context.getSequence());
    this.#map = new SequenceMap(options.sequences);
    this.#stateDir = mkdtempSync(join(tmpdir(), 'kvroute-llama-state-'));
  }

  static async create(options: LlamaCppRuntimeOptions): Promise<LlamaCppRuntime> {
    const batching = new PlanBatching(options.traceTokens ?? false);
    const sizes = `${options.sequences} sequences of ${options.contextTokens} tokens (--max-seqs, --max-model-len)`;
    let context: LlamaContext;
    try {
      context = await options.model.createContext({
        sequences: options.sequences,
        contextSize: options.contextTokens,
        batchSize: options.batchTokens,
        threads: { ideal: options.threads, min: options.threads },
        batching: { itemPrioritizationStrategy: batching.strategy },
      });
    } catch (err) {
      throw new EngineError(
        'ERR_CONFIG',
        `llama.cpp could not make ${sizes}: ${(err as Error).message}`,
      );
    }
    if (context.contextSize < options.contextTokens) {
      await context.dispose();
      throw new EngineError(
        'ERR_CONFIG',
        `llama.cpp made ${context.contextSize} tokens per sequence, not ${sizes}`,
      );
    }
    return new LlamaCppRuntime(context, batching, options);
  }

  /** KV positions per sequence, as the context made them. */
  get contextTokens(): number {
    return this.#context.contextSize;
  }

  counts(): PlacementCounts {
    return { ...this.#counts };
  }

  /** A request the core accepted: its tokens and block keys. */
  register(req: EngineRequest): void {
    const tokens = Array.from(req.promptTokens);
    this.#requests.set(req.id, {
      tokens,
      keys:
        req.blockKeys?.slice() ??
        computeBlockKeys(tokens, this.#blockSize, {
          cacheSalt: req.cacheSalt,
          loraName: req.loraName,
        }),
      sampling: req.sampling ?? { temperature: 0, topK: null, topP: null, minP: null, seed: 0 },
      computed: 0,
    });
  }

  /** The request left (finished or aborted): its sequence turns idle, its KV kept. */
  forget(id: string): void {
    if (this.#inFlight) {
      this.#leaving.add(id);
      return;
    }
    this.#map.release(id);
    this.#requests.delete(id);
  }

  /** Runs one planned step; `uncache` gets the block keys no sequence holds any more. */
  async execute(plan: StepPlan, uncache: (keys: BlockKey[]) => number): Promise<ExecutedStep> {
    if (this.#inFlight) throw new Error('one step at a time');
    this.#inFlight = true;
    const startMs = performance.now();
    try {
      for (const id of plan.preempted) {
        this.#map.release(id);
        const req = this.#requests.get(id);
        if (req) req.computed = 0;
      }
      await this.#placeAdmitted(plan, uncache);
      const placementMs = performance.now() - startMs;
      const inputs: { id: string; tokens: number[] }[] = [];
      const runs: Promise<(undefined | { next: { token?: Token | null } })[]>[] = [];
      const samples: boolean[] = [];
      this.#batching.take();
      for (const entry of plan.entries) {
        const req = this.#requests.get(entry.id)!;
        const seq = this.#seqs[this.#map.seqOf(entry.id)!]!;
        if (seq.nextTokenIndex !== entry.contextTokens || req.computed !== entry.contextTokens) {
          throw new Error(
            `${entry.id}: its sequence holds ${seq.nextTokenIndex} tokens, the plan says ${entry.contextTokens}`,
          );
        }
        const end = entry.contextTokens + entry.tokens;
        const tokens = req.tokens.slice(entry.contextTokens, end);
        const sample = end === req.tokens.length;
        inputs.push({ id: entry.id, tokens });
        samples.push(sample);
        runs.push(seq.controlledEvaluate(evaluationInput(tokens, sample, req)));
      }
      const results = await Promise.all(runs);
      const durationMs = performance.now() - startMs;
      const sampled = new Map<string, number>();
      plan.entries.forEach((entry, i) => {
        const req = this.#requests.get(entry.id)!;
        req.computed += entry.tokens;
        const full = Math.min(Math.floor(req.computed / this.#blockSize), req.keys.length);
        this.#map.setKeys(entry.id, req.keys.slice(0, full));
        if (!samples[i]) return;
        const token = results[i]!.at(-1)?.next.token;
        if (token === undefined || token === null) throw new Error(`${entry.id}: no token sampled`);
        req.tokens.push(token);
        sampled.set(entry.id, token);
      });
      return { durationMs, placementMs, sampled, inputs, batches: this.#batching.take() };
    } finally {
      this.#inFlight = false;
      for (const id of this.#leaving) this.forget(id);
      this.#leaving.clear();
    }
  }

  async dispose(): Promise<void> {
    await this.#context.dispose();
    rmSync(this.#stateDir, { recursive: true, force: true });
  }

  /** Gives each admitted request a sequence that holds exactly its cached prefix. */
  async #placeAdmitted(plan: StepPlan, uncache: (keys: BlockKey[]) => number): Promise<void> {
    if (plan.admitted.length === 0) return;
    const admitted = new Set(plan.admitted);
    const entries = plan.entries.filter((e) => e.kind === 'prefill' && admitted.has(e.id));
    const lost: BlockKey[] = [];
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[i]!;
      const req = this.#requests.get(entry.id)!;
      const needed = new Set<BlockKey>();
      for (const later of entries.slice(i + 1)) {
        const r = this.#requests.get(later.id)!;
        for (const k of r.keys.slice(0, later.contextTokens / this.#blockSize)) needed.add(k);
      }
      const placement = this.#map.place(req.keys, entry.contextTokens / this.#blockSize, needed);
      await this.#realize(placement, req.tokens, entry.contextTokens);
      this.#map.assign(entry.id, placement, req.keys);
      req.computed = entry.contextTokens;
      if (placement.source !== null) this.#counts.copied++;
      else if (placement.keepBlocks > 0) this.#counts.inPlace++;
      else this.#counts.cold++;
      lost.push(...placement.lost);
    }
    const gone = [...new Set(lost)].filter((k) => !this.#map.holds(k));
    if (gone.length > 0) this.#counts.uncached += uncache(gone);
  }

  /** The physical side of a placement: copy, then erase past the kept prefix, then check. */
  async #realize(placement: Placement, tokens: readonly number[], keep: number): Promise<void> {
    const seq = this.#seqs[placement.target]!;
    if (placement.source !== null) {
      const file = join(this.#stateDir, `copy-${++this.#copies}.state`);
      try {
        await this.#seqs[placement.source]!.saveStateToFile(file);
        await seq.loadStateFromFile(file, { acceptRisk: true });
      } finally {
        await rm(file, { force: true });
      }
    }
    if (keep === 0) await seq.clearHistory();
    else if (seq.nextTokenIndex > keep) {
      await seq.eraseContextTokenRanges([{ start: keep, end: seq.nextTokenIndex }]);
    }
    const prefix = tokens.slice(0, keep) as Token[];
    if (
      seq.nextTokenIndex !== keep ||
      seq.compareContextTokens(prefix).firstDifferentIndex !== keep
    ) {
      throw new Error(`sequence ${placement.target} does not hold the ${keep}-token cached prefix`);
    }
  }
}

/** The entry's tokens; the last samples the next one when `sample`, with the request's knobs. */
function evaluationInput(
  tokens: number[],
  sample: boolean,
  req: RequestState,
): ControlledEvaluateInputItem[] {
  const items: ControlledEvaluateInputItem[] = tokens.slice() as Token[];
  if (!sample) return items;
  items[items.length - 1] = [
    tokens[tokens.length - 1]! as Token,
    { generateNext: { token: true, options: samplerOptions(req.sampling, req.tokens.length) } },
  ];
  return items;
}
