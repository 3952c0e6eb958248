/**
 * The engine core's contract: what its drivers (the engine server on the wall clock, the fleet
 * simulator on a virtual clock) put in and get out. The core itself has no clock and no I/O.
 */
import type { KvEvent } from '../kv/events.ts';
import type { ReplicaSpec } from '../model/cost.ts';
import type { KvPolicyName } from '../scheduler/types.ts';
import type { LoraConfig } from './lora.ts';

// The scheduler owns these; the engine's drivers meet them here, as part of its contract.
export { EngineError } from '../scheduler/errors.ts';
export type { KvPolicyName };

export interface EngineConfig {
  spec: ReplicaSpec;
  /** Tokens one step may compute (prefill and decode alike). */
  budgetTokens: number;
  /** Running sequences at most. */
  maxSeqs: number;
  kvPolicy: KvPolicyName;
  /** Tokens per KV block (16, as vLLM). */
  blockSize: number;
  /** KV blocks in the pool; default: the cost model's KV pool tokens / blockSize. */
  kvBlocks?: number;
  /** Automatic prefix caching (default true). */
  prefixCaching?: boolean;
  /** Scheduler options from the seed's probes (see scheduler config). */
  rotateDecodes?: boolean;
  alignChunksToBlocks?: boolean;
  longPrefillThreshold?: number;
  maxPartialPrefills?: number;
  /** Paged mode: fraction of blocks kept free when admitting (vLLM's watermark, default 0.01). */
  watermark?: number;
  /**
   * LoRA adapters (vLLM's --enable-lora and its limits); absent: LoRA off, and a request's
   * `loraName` only keys its cache.
   */
  lora?: LoraConfig;
}

export interface EngineRequest {
  id: string;
  /** An Int32Array is kept as given (no copy): the caller must not change it afterwards. */
  promptTokens: readonly number[] | Int32Array;
  /** Tokens to generate, >= 1; the first comes out of the last prefill chunk. */
  maxNewTokens: number;
  cacheSalt?: string;
  loraName?: string;
  /** Lower runs first (vLLM's convention); default 0. */
  priority?: number;
  /** The driver's clock at arrival; used only for ordering and ageing, never read as time. */
  arrivalMs: number;
  /**
   * Must equal computeBlockKeys(promptTokens, blockSize, scope); the simulator passes them to
   * avoid hashing twice.
   */
  blockKeys?: readonly number[];
  /** How a runtime that computes logits draws this request's tokens (the sim runtime ignores it). */
  sampling?: SamplingParams;
}

/** vLLM's sampling knobs as a real runtime applies them; null: off. */
export interface SamplingParams {
  /** Below 1e-5: greedy. */
  temperature: number;
  topK: number | null;
  topP: number | null;
  minP: number | null;
  /** Seeds the draws (the request's seed, or one the server derives). */
  seed: number;
}

export interface TokenEmitted {
  id: string;
  /** 0-based index of this output token. */
  index: number;
  /** The sampled token, from a runtime that samples (absent from the sim runtime). */
  tokenId?: number;
}

export interface RequestFinished {
  id: string;
  promptTokens: number;
  /** Prompt tokens served from the prefix cache at (last) admission. */
  cachedTokens: number;
  outputTokens: number;
  reason: 'length' | 'abort';
}

export interface StepResult {
  /** The scheduler's plan for this step (plain data). */
  plan: unknown;
  /** Modeled duration of the step; the driver advances its clock by this. */
  durationMs: number;
  prefillTokens: number;
  decodeTokens: number;
  emitted: TokenEmitted[];
  finished: RequestFinished[];
  /** Ids preempted this step (paged mode); they are back in the queue. */
  preempted: string[];
  events: KvEvent[];
}

export interface EngineCounters {
  running: number;
  waiting: number;
  /** Fraction of KV blocks in use, 0..1. */
  kvUsage: number;
  kvBlocksTotal: number;
  kvBlocksFree: number;
  prefixCacheQueriesTokens: number;
  prefixCacheHitsTokens: number;
  preemptions: number;
  promptTokens: number;
  generationTokens: number;
  /** Present when LoRA is on. */
  lora?: EngineLoraCounters;
}

/** Adapters in the engine now (what vLLM's `vllm:lora_requests_info` reports, and more). */
export interface EngineLoraCounters {
  maxLoras: number;
  /** Adapters of running requests, in the order they first appeared. */
  running: string[];
  /** Adapters of waiting requests (held back or queued). */
  waiting: string[];
  /** Adapters resident in the engine's cache, least recently used first. */
  resident: string[];
  /** Adapters loaded by steps (not resident when a request needed them). */
  loads: number;
}
