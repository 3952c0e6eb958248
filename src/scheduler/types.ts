/**
 * The scheduler's data in and out: its config, the requests it takes, the plan it returns each
 * step and what applying a plan produced. All plain data.
 */
import type { BlockKey } from '../kv/blockKey.ts';

/** How the scheduler gets KV memory (see kvPolicy.ts); `paged` is vLLM's and the default. */
export const KV_POLICY_NAMES = ['paged', 'reserve'] as const;
export type KvPolicyName = (typeof KV_POLICY_NAMES)[number];

/**
 * How a step is formed. `mixed` (vLLM, the default): the running decodes, then prefill chunks,
 * in one step. `prefill-first` (SGLang without `--enable-mixed-chunk`): a step is a prefill
 * batch whenever one can be formed, else a decode batch of the running requests
 * (`get_next_batch_to_run`, python/sglang/srt/managers/scheduler.py).
 */
export const BATCH_SHAPES = ['mixed', 'prefill-first'] as const;
export type BatchShape = (typeof BATCH_SHAPES)[number];

/**
 * SGLang's schedule policies for its waiting list (`--schedule-policy`, schedule_policy.py):
 * `fcfs` keeps the list's order; `lpm` sorts it by longest cached prefix before each prefill
 * batch while it holds at most `LPM_MAX_QUEUE` requests, and leaves it as it is above that.
 */
export const SCHEDULE_POLICIES = ['fcfs', 'lpm'] as const;
export type SchedulePolicy = (typeof SCHEDULE_POLICIES)[number];

export interface SchedulerConfig {
  /** Tokens one step may compute, prefill and decode alike (>= 1). */
  budgetTokens: number;
  /** Running sequences at most (>= 1). */
  maxSeqs: number;
  /** `reserve`: prompt + max new tokens at admission, never preempt (the seed). `paged`: vLLM's. */
  kvPolicy: KvPolicyName;
  /**
   * When decodes alone exceed the budget, start each step's decodes where the last one stopped.
   * A guard only: decodes ready at a step come from the previous step's entries, at most one per
   * budget token, so with a fixed budget they never outnumber it.
   */
  rotateDecodes?: boolean;
  /**
   * Read the running requests' state in one pass before planning each step. For a simulator
   * stepping many engines in turn, whose requests are out of cache by their next step; alone
   * in cache it only adds that pass (~1.5 µs a step at 256 running). Default false.
   */
  prefetchRunning?: boolean;
  /** Round prefill chunks down to the block size, except a prompt's last chunk. */
  alignChunksToBlocks?: boolean;
  /** Most prompt tokens one request may prefill in one step (0 or absent: no cap). */
  longPrefillThreshold?: number;
  /** Most requests partway through their prefill at once (absent: no cap). */
  maxPartialPrefills?: number;
  /** Paged: fraction of blocks that admission keeps free (vLLM's watermark, default 0.01). */
  watermark?: number;
  /**
   * Waiting time worth one priority level: the queue orders by arrivalMs + priority x this, so a
   * low-priority request overtakes higher ones that arrived this much later (default 10,000).
   */
  priorityAgeMs?: number;
  /**
   * Most distinct LoRA adapters among running requests (vLLM's --max-loras); absent: no limit
   * (LoRA off, or adapters used only to key the cache). A waiting request whose adapter would
   * exceed it is held back for the step while the requests behind it are still considered.
   */
  maxLoras?: number;
  /** How a step is formed (default `mixed`). */
  batchShape?: BatchShape;
  /**
   * SGLang's waiting list and its policy (`fcfs` or `lpm`); absent: kvroute's queue ordered by
   * priority and arrival, preempted requests back at its front (vLLM's).
   */
  schedulePolicy?: SchedulePolicy;
  /**
   * SGLang's overlap scheduler (on by default there, `--disable-overlap-schedule`): the batch
   * after a step is formed before that step's results are processed, so a prompt whose prefill
   * ended in step k enters the prefix cache after step k+1 is planned, matchable from step k+2
   * (`event_loop_overlap`, scheduler.py). A chunk that leaves its prompt unfinished is cached at
   * once, as SGLang caches its being-chunked request before forming the next batch.
   */
  deferPrefixInsert?: boolean;
}

/** What the scheduler needs to know about a request. */
export interface SchedRequest {
  id: string;
  promptTokens: number;
  /** >= 1; the first comes out of the last prefill chunk. */
  maxNewTokens: number;
  /** Lower runs first (default 0). */
  priority?: number;
  /** Used for ordering and ageing only (default 0). */
  arrivalMs?: number;
  /** Prompt token ids and their full blocks' keys: needed for prefix caching and KV events. */
  tokenIds?: ArrayLike<number>;
  blockKeys?: readonly BlockKey[];
  cacheSalt?: string;
  loraName?: string;
  /** The caller's number for the request, handed back with each of its tokens (default -1). */
  handle?: number;
}

export type PlanEntryKind = 'decode' | 'prefill';

export interface PlanEntry {
  id: string;
  kind: PlanEntryKind;
  /** Tokens computed for this request in this step. */
  tokens: number;
  /** Tokens of this request whose KV existed before the step (its attention context). */
  contextTokens: number;
}

/** One step's plan: decodes first, then prefill chunks (running ones, then admissions). */
export interface StepPlan {
  stepIndex: number;
  entries: PlanEntry[];
  prefillTokens: number;
  decodeTokens: number;
  /** KV tokens the step's attention reads: every entry's context, summed. */
  kvTokensRead: number;
  /** Requests admitted this step, in admission order. */
  admitted: string[];
  /** Requests preempted this step (paged): back in the queue, KV freed. */
  preempted: string[];
}

export interface TokenOut {
  id: string;
  /** 0-based index of this output token. */
  index: number;
  /** The request's `SchedRequest.handle`; -1 when it gave none. */
  handle: number;
}

export interface SeqFinished {
  id: string;
  promptTokens: number;
  /** Prompt tokens served from the prefix cache at the (last) admission. */
  cachedTokens: number;
  /**
   * Tokens already computed when each prefill chunk after the first started, summed. SGLang
   * logs a chunk's earlier chunks as that batch's cached tokens (`PrefillAdder.add_inflight_req`
   * passes `len(req.prefix_indices)` to `_prefill_one_req`, which adds it to `log_hit_tokens`;
   * python/sglang/srt/managers/schedule_policy.py), so its reported hit rate counts them.
   */
  resumedPrefixTokens?: number;
  outputTokens: number;
  reason: 'length' | 'abort';
}

/** What applying one plan produced. */
export interface StepOutcome {
  emitted: TokenOut[];
  finished: SeqFinished[];
}

export interface SchedulerCounters {
  running: number;
  waiting: number;
  prefixQueriesTokens: number;
  prefixHitsTokens: number;
  preemptions: number;
  /** Prompt tokens of requests whose prompt finished (once per request). */
  promptTokens: number;
  generationTokens: number;
}

/**
 * Requests per LoRA adapter, running and waiting, in the order the adapters first appeared
 * (vLLM's SchedulerStats.running_lora_adapters / waiting_lora_adapters).
 */
export interface LoraCounts {
  running: ReadonlyMap<string, number>;
  waiting: ReadonlyMap<string, number>;
}
