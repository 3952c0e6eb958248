/**
 * The engine core's contract: what its drivers (the engine server on the wall clock, the fleet
 * simulator on a virtual clock) put in and get out. The core itself has no clock and no I/O.
 */
import type { KvEvent } from '../kv/events.ts';
import type { ReplicaSpec } from '../model/cost.ts';
import type {
  BatchShape,
  KvPolicyName,
  SchedulePolicy,
  SeqFinished,
  TokenOut,
} from '../scheduler/types.ts';
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
  /** The scheduler's `prefetchRunning`: on in the fleet simulator. */
  prefetchRunning?: boolean;
  longPrefillThreshold?: number;
  maxPartialPrefills?: number;
  /** Paged mode: fraction of blocks kept free when admitting (vLLM's watermark, default 0.01). */
  watermark?: number;
  /** The scheduler's step shape, waiting list and overlap delay (scheduler types; SGLang's). */
  batchShape?: BatchShape;
  schedulePolicy?: SchedulePolicy;
  deferPrefixInsert?: boolean;
  /**
   * LoRA adapters (vLLM's --enable-lora and its limits); absent: LoRA off, and a request's
   * `loraName` only keys its cache.
   */
  lora?: LoraConfig;
  /**
   * The NixlConnector (vLLM's --kv-transfer-config): requests may keep their blocks for a remote
   * decode or bring blocks pulled from a remote prefill (`EngineRequest.kvTransfer`).
   */
  kvTransfer?: {
    abortTimeoutMs?: number;
    /** Blocks held for remote decodes, all clients together (default: unbounded). */
    maxHeldBlocks?: number;
    /** ... and per `EngineRequest.transferClient` (default: unbounded). */
    maxHeldBlocksPerClient?: number;
  };
  /**
   * A CPU tier of KV blocks (vLLM's OffloadingConnector: `--kv-offloading-size`, or
   * `--kv-transfer-config` with `num_cpu_blocks` / `cpu_bytes_to_use`): GPU evictions are kept
   * there and a prompt's prefix is loaded back from it at `cpuKvGbps` (connector/offloading.ts).
   */
  cpuOffload?: { cpuBlocks: number; cpuKvGbps?: number };
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
  /**
   * With `EngineConfig.kvTransfer`: 'remote-decode' keeps the prompt's blocks when the request
   * finishes at its length (vLLM's do_remote_decode); 'remote-prefill' says its prompt's blocks
   * were pulled from a prefiller and are written into the pool at `add` (do_remote_prefill).
   */
  kvTransfer?: 'remote-decode' | 'remote-prefill';
  /** Who sent a 'remote-decode' request: its held blocks count against this client's bound. */
  transferClient?: string;
  /** How a runtime that computes logits draws this request's tokens (the sim runtime ignores it). */
  sampling?: SamplingParams;
  /**
   * The driver's own number for the request, handed back with each of its tokens
   * (`TokenEmitted.handle`): the simulator finds a token's request in a dense array by it.
   */
  handle?: number;
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

/** A scheduler's TokenOut (its `handle` is the request's `EngineRequest.handle`), as the engine reports it. */
export interface TokenEmitted extends TokenOut {
  /** The sampled token, from a runtime that samples (absent from the sim runtime). */
  tokenId?: number;
}

/** The scheduler's SeqFinished, as the engine reports it. */
export interface RequestFinished extends SeqFinished {
  /** A remote-decode request's blocks held for the consumer (its `remote_block_ids`). */
  heldBlockIds?: number[];
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
  /** Present with a KV connector. */
  kvTransfer?: EngineKvTransferCounters;
  /** Present with a CPU tier (the OffloadingConnector). */
  cpuOffload?: EngineCpuOffloadCounters;
}

/** The CPU tier's state (connector/offloading.ts). */
export interface EngineCpuOffloadCounters {
  cpuBlocksTotal: number;
  cpuBlocksUsed: number;
  /** Blocks written into the tier (GPU evictions it kept), read back, and dropped for room. */
  storedBlocks: number;
  loadedBlocks: number;
  evictedBlocks: number;
  /** Prompt tokens loaded back from the tier instead of recomputed. */
  loadedTokens: number;
  /**
   * The connector's prefix-cache queries and hits, tokens, as vLLM counts them apart from the
   * GPU prefix cache's (`vllm:external_prefix_cache_queries` / `_hits`): at a request's first
   * admission, its prompt less its GPU-cached part, and the part of it the tier supplied.
   * `prefixCacheHitsTokens` leaves those hits out.
   */
  externalQueriesTokens: number;
  externalHitsTokens: number;
  /** KV bytes copied back to the GPU, and written to the tier. */
  loadedBytes: number;
  storedBytes: number;
}

/** The NixlConnector's state (vLLM's connector stats and P/D bookkeeping). */
export interface EngineKvTransferCounters {
  /** Producer: requests and blocks held for remote decodes. */
  heldRequests: number;
  heldBlocks: number;
  /** Producer: holds freed by the abort timeout, never pulled. */
  expiredHolds: number;
  /** Producer: holds not taken because they would pass `maxHeldBlocks` or the client's bound. */
  refusedHolds?: number;
  /** Consumer: prompt tokens written from pulls (computed, not prefix-cache hits). */
  externalTokens: number;
  /** Consumer: pulled blocks waiting for their request's admission. */
  injectedBlocks: number;
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
