/**
 * Continuous batching with a token budget and chunked prefill (the scheduler seed). Each step
 * spends the budget in a fixed order:
 *   1. one token per running decode, oldest first (each is a user waiting on a token);
 *   2. the rest of partially prefilled prompts, so a prompt started earlier finishes first;
 *   3. new requests, first come first served, stopping at the first that does not fit.
 * The last prefill chunk samples the first token. `schedule()` returns a plain plan; `complete()`
 * applies it once the step ran. KV comes through a KvPolicy (reserve or paged); when a paged pool
 * runs dry the most recently admitted running request is preempted and recomputed later.
 * With `maxLoras`, admission also follows vLLM's LoRA rule (see #admitWaiting).
 *
 * SGLang's scheduler, as modes (SchedulerConfig): `batchShape: 'prefill-first'` plans a step of
 * prefill chunks alone whenever one can be formed, decodes only when none can;
 * `schedulePolicy` keeps SGLang's waiting list (`fcfs`, or `lpm` sorted by cached prefix);
 * `deferPrefixInsert` caches a prompt whose prefill ended in step k only once step k+1 is planned
 * (the overlap scheduler).
 */
import type { BlockPool, PrefixMatch } from '../kv/blockPool.ts';
import { prefillChunkTokens } from './chunks.ts';
import { LPM_MAX_QUEUE, type ResolvedSchedulerConfig, resolveSchedulerConfig } from './config.ts';
import { EngineError } from './errors.ts';
import type { KvPolicy } from './kvPolicy.ts';
import { makeKvPolicy } from './makeKvPolicy.ts';
import { PlanBuilder } from './planBuilder.ts';
import { Seq } from './seq.ts';
import type {
  LoraCounts,
  SchedRequest,
  SchedulerConfig,
  SchedulerCounters,
  SeqFinished,
  StepOutcome,
  StepPlan,
  TokenOut,
} from './types.ts';
import { listQueue, WaitQueue } from './waitQueue.ts';

const NO_HIT: PrefixMatch = Object.freeze({ blockIds: [], freeBlocks: 0 }) as PrefixMatch;

export class Scheduler {
  readonly config: Readonly<ResolvedSchedulerConfig>;
  /** What the last `#prefetch` read: kept so that the compiler keeps the reads. */
  prefetched = 0;
  readonly #pool: BlockPool;
  readonly #blockSize: number;
  readonly #kv: KvPolicy;
  /** kvroute's priority queue, or SGLang's waiting list when a schedule policy is set. */
  readonly #waiting: WaitQueue;
  /** Requests whose prompt finished in the last step, cached once the next plan is built. */
  #deferredStores: Seq[] = [];
  /** Admission order within each priority level, best level first: the back is preempted first. */
  readonly #running: Seq[] = [];
  readonly #live = new Map<string, Seq>();
  #addSeq = 0;
  #admitSeq = 0;
  #stepIndex = 0;
  #decodeCursor = 0;
  /** Running requests still in their prefill. */
  #prefilling = 0;
  #pending: { plan: StepPlan; seqs: Seq[] } | null = null;
  /** Requests per LoRA adapter, running and waiting (adapters with none are dropped). */
  readonly #runningLoras = new Map<string, number>();
  readonly #waitingLoras = new Map<string, number>();
  readonly #counters = {
    prefixQueriesTokens: 0,
    prefixHitsTokens: 0,
    preemptions: 0,
    promptTokens: 0,
    generationTokens: 0,
  };

  constructor(config: SchedulerConfig, pool: BlockPool) {
    this.config = resolveSchedulerConfig(config, pool.blockSize);
    this.#pool = pool;
    this.#blockSize = pool.blockSize;
    this.#kv = makeKvPolicy(this.config.kvPolicy, pool, { watermark: this.config.watermark });
    this.#waiting = this.config.schedulePolicy === null ? new WaitQueue() : listQueue();
  }

  /** Queues a request; throws EngineError when it is malformed or can never fit. */
  add(req: SchedRequest): void {
    if (this.#live.has(req.id)) {
      throw new EngineError('ERR_DUPLICATE_ID', `request ${req.id} is already queued or running`);
    }
    checkRequest(req, this.#pool.blockSize);
    const reason = this.#kv.neverFitsReason(req.promptTokens, req.maxNewTokens);
    if (reason !== null) throw new EngineError('ERR_NEVER_FITS', `${req.id}: ${reason}`);
    const seq = new Seq(req, this.#addSeq++, this.config.priorityAgeMs);
    this.#live.set(seq.id, seq);
    this.#waiting.insert(seq);
    countLora(this.#waitingLoras, seq.loraName, 1);
  }

  /** Drops a request wherever it is and frees its KV now; null when it is not here. */
  abort(id: string): SeqFinished | null {
    const seq = this.#live.get(id);
    if (seq === undefined) return null;
    if (seq.status === 'waiting') {
      this.#waiting.remove(seq);
      countLora(this.#waitingLoras, seq.loraName, -1);
    } else {
      this.#running.splice(this.#running.indexOf(seq), 1);
      countLora(this.#runningLoras, seq.loraName, -1);
      if (seq.isPrefilling) this.#prefilling--;
      this.#releaseKv(seq);
    }
    seq.status = 'aborted';
    this.#live.delete(id);
    return finishedRecord(seq, 'abort');
  }

  schedule(): StepPlan {
    if (this.#pending !== null) throw new Error('complete() the last plan before scheduling again');
    const b = new PlanBuilder(this.#stepIndex++, this.config.budgetTokens, this.#running.length);
    if (this.config.batchShape === 'prefill-first') {
      // SGLang's get_next_batch_to_run: "Run prefill first if possible", else decode.
      if (this.#prefilling > 0) this.#continuePrefills(b);
      if (b.preempted.length === 0) this.#admitWaiting(b);
      if (b.planned === 0) this.#scheduleDecodes(b);
    } else {
      this.#scheduleDecodes(b);
      if (this.#prefilling > 0) this.#continuePrefills(b);
      if (b.preempted.length === 0) this.#admitWaiting(b);
    }
    this.#pending = b.build();
    // The overlap scheduler processes the last step's results after planning this one.
    if (this.#deferredStores.length > 0) this.#storeDeferred();
    return this.#pending.plan;
  }

  /** Applies the plan the last `schedule()` returned, after the step ran. */
  complete(plan: StepPlan): StepOutcome {
    const pending = this.#pending;
    if (pending === null || pending.plan !== plan) {
      throw new Error('complete() takes the plan the last schedule() returned');
    }
    this.#pending = null;
    const { entries } = plan;
    const defer = this.config.deferPrefixInsert;
    // At most one token per entry: allocated once, cut to what came out.
    const emitted = new Array<TokenOut>(entries.length);
    let emittedCount = 0;
    const finished: SeqFinished[] = [];
    for (let i = 0; i < entries.length; i++) {
      const seq = pending.seqs[i]!;
      if (seq.status !== 'running') continue; // aborted after it was planned
      const wasPrefilling = seq.isPrefilling;
      seq.computedTokens += entries[i]!.tokens;
      if (seq.storedBlocks < seq.keyBlocks) {
        if (defer && wasPrefilling && !seq.isPrefilling) this.#deferStore(seq);
        else this.#storeBlocks(seq);
      }
      if (wasPrefilling && !seq.isPrefilling) this.#prefillDone(seq);
      if (seq.computedTokens < seq.knownTokens) continue;
      // Every known token has KV: this step sampled the next one.
      emitted[emittedCount++] = { id: seq.id, index: seq.generatedTokens++, handle: seq.handle };
      this.#counters.generationTokens++;
      if (seq.generatedTokens === seq.maxNewTokens) finished.push(this.#finish(seq));
    }
    if (finished.length > 0) this.#dropFinished();
    if (emittedCount !== emitted.length) emitted.length = emittedCount;
    return { emitted, finished };
  }

  hasWork(): boolean {
    return this.#running.length > 0 || this.#waiting.size > 0;
  }

  counters(): SchedulerCounters {
    // Named fields rather than a spread: the fleet reads these after every step.
    const c = this.#counters;
    return {
      running: this.#running.length,
      waiting: this.#waiting.size,
      prefixQueriesTokens: c.prefixQueriesTokens,
      prefixHitsTokens: c.prefixHitsTokens,
      preemptions: c.preemptions,
      promptTokens: c.promptTokens,
      generationTokens: c.generationTokens,
    };
  }

  /** Prompt tokens served from the prefix cache at the request's (last) admission. */
  cachedTokensOf(id: string): number | undefined {
    return this.#live.get(id)?.cachedTokens;
  }

  /** The prompt length of a queued or running request; undefined when unknown. */
  promptTokensOf(id: string): number | undefined {
    return this.#live.get(id)?.promptTokens;
  }

  /** The LoRA adapter a queued or running request runs with; null: the base model or unknown. */
  loraOf(id: string): string | null {
    return this.#live.get(id)?.loraName ?? null;
  }

  /** Requests per adapter, running and waiting (copies). */
  loraCounts(): LoraCounts {
    return { running: new Map(this.#runningLoras), waiting: new Map(this.#waitingLoras) };
  }

  /** Running ids in decode order (a copy; for inspection and tests). */
  runningIds(): string[] {
    return this.#running.map((seq) => seq.id);
  }

  /** Waiting ids in queue order (a copy; for inspection and tests). */
  waitingIds(): string[] {
    return this.#waiting.toArray().map((seq) => seq.id);
  }

  /** 1. One token per ready decode, oldest first, or from a rotating start when asked. */
  #scheduleDecodes(b: PlanBuilder): void {
    const running = this.#running;
    const count = running.length;
    const rotate = this.config.rotateDecodes;
    const start = rotate && count > 0 ? this.#decodeCursor % count : 0;
    let next = start;
    if (this.config.prefetchRunning) this.#prefetch(running);
    for (let k = 0; k < count; k++) {
      const i = start + k < count ? start + k : start + k - count;
      // Preemption takes requests from the back, so any index still in range is the same request.
      if (i >= running.length) continue;
      const seq = running[i]!;
      if (seq.isPrefilling) continue;
      if (b.leftTokens === 0) {
        // Out of budget with decodes left: the next step starts after the last one served.
        if (rotate) this.#decodeCursor = next;
        return;
      }
      if (!this.#secureKv(seq, 1, b)) continue;
      b.add(seq, 'decode', 1);
      next = i + 1;
    }
  }

  /**
   * Reads what this step reads of each running request first, in a loop that does nothing else
   * (`prefetchRunning`). In a simulated fleet, one engine's requests have gone out of cache
   * while hundreds of others stepped; this loop lets the CPU fetch them side by side, where the
   * planning would wait on each in turn.
   */
  #prefetch(running: readonly Seq[]): void {
    let sum = 0;
    for (let i = 0; i < running.length; i++) {
      const seq = running[i]!;
      sum += seq.computedTokens + seq.prefillEndTokens + seq.blockCount + seq.keyBlocks;
    }
    this.prefetched = sum;
  }

  /** 2. The rest of prompts admitted in earlier steps, in running order. */
  #continuePrefills(b: PlanBuilder): void {
    const running = this.#running;
    for (let i = 0; i < running.length && b.leftTokens > 0; i++) {
      const seq = running[i]!;
      if (!seq.isPrefilling) continue;
      const tokens = prefillChunkTokens(
        seq.computedTokens,
        seq.prefillEndTokens,
        b.leftTokens,
        this.config,
      );
      if (tokens > 0 && this.#secureKv(seq, tokens, b)) {
        seq.resumedPrefixTokens += seq.computedTokens;
        b.add(seq, 'prefill', tokens);
      }
    }
  }

  /**
   * 3. Admit first come, first served; stop at the first request that does not fit. LoRA: a
   * request whose adapter would make the running set exceed `maxLoras` distinct adapters is held
   * back and the queue behind it is still considered, as vLLM's waiting loop does
   * (vllm/v1/core/sched/scheduler.py):
   *
   *     # Check that adding the request still respects the max_loras
   *     # constraint.
   *     if (self.lora_config and request.lora_request and
   *         (len(scheduled_loras) == self.lora_config.max_loras and
   *          request.lora_request.lora_int_id not in scheduled_loras)):
   *         # Scheduling would exceed max_loras, skip.
   *         self.waiting.pop_request()
   *         skipped_waiting_requests.prepend_request(request)
   *         continue
   *
   * and the skipped requests go back to the front of the queue after the loop. vLLM's set is
   * the adapters of the running requests scheduled this step plus those admitted; this one counts
   * every running request, which is the same set whenever admission runs at all (a step admits
   * only when no running request was left out for budget or KV) and never smaller.
   */
  #admitWaiting(b: PlanBuilder): void {
    const { maxSeqs, maxPartialPrefills, maxLoras } = this.config;
    const blockSize = this.#pool.blockSize;
    const loras = this.#runningLoras;
    let skipped: Seq[] | null = null;
    if (this.config.schedulePolicy === 'lpm' && this.#running.length < maxSeqs) {
      this.#sortLongestPrefix();
    }
    while (
      b.leftTokens > 0 &&
      this.#running.length < maxSeqs &&
      this.#prefilling < maxPartialPrefills
    ) {
      const seq = this.#waiting.peek();
      if (seq === undefined) break;
      if (seq.loraName !== null && loras.size >= maxLoras && !loras.has(seq.loraName)) {
        this.#waiting.shift();
        (skipped ??= []).push(seq);
        continue;
      }
      const hit = this.#findPrefix(seq);
      const cachedTokens = hit.blockIds.length * blockSize;
      const tokens = prefillChunkTokens(cachedTokens, seq.knownTokens, b.leftTokens, this.config);
      if (tokens === 0 || !this.#kv.tryAdmit(seq, hit, tokens)) break;
      this.#waiting.shift();
      this.#start(seq, cachedTokens);
      b.add(seq, 'prefill', tokens);
      b.admitted.push(seq.id);
    }
    // Back to the front, in their order: they were ahead of everything still queued.
    if (skipped !== null) {
      const waiting = this.#waiting;
      const list = this.config.schedulePolicy !== null;
      for (let i = skipped.length - 1; i >= 0; i--) {
        if (list) waiting.unshift(skipped[i]!);
        else waiting.insert(skipped[i]!);
      }
    }
  }

  /**
   * SGLang's LPM (`calc_priority`, python/sglang/srt/managers/schedule_policy.py, v0.4): before a
   * prefill batch, match every waiting request against the cache and sort the list by matched
   * length, longest first, ties in list order (Python's sort is stable); above `LPM_MAX_QUEUE`
   * waiting requests the list is left as it is (fcfs). The in-batch prefix check that holds back
   * all but one of several requests sharing an uncached prefix (`IN_BATCH_PREFIX_CACHING_*`) came
   * after v0.4 (sgl-project/sglang#2442, merged after the 2024-12-04 release) and is not here.
   */
  #sortLongestPrefix(): void {
    const waiting = this.#waiting;
    const n = waiting.size;
    if (n < 2 || n > LPM_MAX_QUEUE) return;
    const keys = waiting.toArray().map((seq) => -this.#findPrefix(seq).blockIds.length);
    waiting.sortByKeys(keys);
  }

  /** Holds the prompt's last blocks back until the next plan is built (deferPrefixInsert). */
  #deferStore(seq: Seq): void {
    if (seq.storePending) return;
    seq.storePending = true;
    this.#deferredStores.push(seq);
  }

  #storeDeferred(): void {
    const seqs = this.#deferredStores;
    this.#deferredStores = [];
    for (const seq of seqs) {
      if (!seq.storePending) continue; // stored at its release
      seq.storePending = false;
      if (seq.status === 'running') this.#storeBlocks(seq);
    }
  }

  /** Longest cached prefix, leaving at least one token to compute (it samples the next one). */
  #findPrefix(seq: Seq): PrefixMatch {
    if (seq.blockKeys === null || !this.#pool.cachingEnabled) return NO_HIT;
    const maxBlocks = Math.floor((seq.knownTokens - 1) / this.#pool.blockSize);
    return this.#pool.findCachedPrefix(seq.blockKeys, maxBlocks);
  }

  #start(seq: Seq, cachedTokens: number): void {
    seq.status = 'running';
    seq.computedTokens = cachedTokens;
    seq.cachedTokens = cachedTokens;
    seq.storedBlocks = cachedTokens / this.#pool.blockSize;
    seq.prefillEndTokens = seq.knownTokens;
    seq.admitSeq = this.#admitSeq++;
    this.#prefilling++;
    countLora(this.#waitingLoras, seq.loraName, -1);
    countLora(this.#runningLoras, seq.loraName, 1);
    this.#counters.prefixQueriesTokens += seq.knownTokens;
    this.#counters.prefixHitsTokens += cachedTokens;
    const running = this.#running;
    let i = running.length;
    while (i > 0 && running[i - 1]!.priority > seq.priority) i--;
    if (i === running.length) running.push(seq);
    else running.splice(i, 0, seq);
  }

  /**
   * KV for `tokens` more tokens of `seq`. While the pool is dry, preempt from the back of the
   * running list (vLLM's order), which may be `seq` itself: then false.
   */
  #secureKv(seq: Seq, tokens: number, b: PlanBuilder): boolean {
    // Room in the blocks it holds (a decode 15 steps in 16): no policy asks for none more.
    if (seq.computedTokens + tokens <= seq.blockCount * this.#blockSize) return true;
    while (!this.#kv.tryGrow(seq, tokens)) {
      const victim = this.#running[this.#running.length - 1]!;
      this.#preempt(victim, b);
      if (victim === seq) return false;
    }
    return true;
  }

  /** Frees the request's KV and queues it again; it will recompute prompt + generated tokens. */
  #preempt(seq: Seq, b: PlanBuilder): void {
    this.#running.pop();
    if (seq.isPrefilling) this.#prefilling--;
    b.drop(seq);
    this.#releaseKv(seq);
    seq.status = 'waiting';
    seq.computedTokens = 0;
    seq.preemptions++;
    this.#waiting.insert(seq);
    countLora(this.#runningLoras, seq.loraName, -1);
    countLora(this.#waitingLoras, seq.loraName, 1);
    b.preempted.push(seq.id);
    this.#counters.preemptions++;
  }

  #prefillDone(seq: Seq): void {
    this.#prefilling--;
    if (seq.generatedTokens === 0) this.#counters.promptTokens += seq.promptTokens;
  }

  /** Offers the prompt blocks that just became full to the prefix cache. */
  #storeBlocks(seq: Seq): void {
    const keys = seq.blockKeys!;
    const full = Math.min(Math.floor(seq.computedTokens / this.#pool.blockSize), keys.length);
    if (full <= seq.storedBlocks) return;
    this.#pool.cacheFullBlocks(
      seq.blockIds,
      keys,
      seq.storedBlocks,
      full,
      seq.tokenIds!,
      seq.scope,
    );
    seq.storedBlocks = full;
  }

  #finish(seq: Seq): SeqFinished {
    seq.status = 'finished';
    countLora(this.#runningLoras, seq.loraName, -1);
    this.#releaseKv(seq);
    this.#live.delete(seq.id);
    return finishedRecord(seq, 'length');
  }

  #releaseKv(seq: Seq): void {
    // A prompt still waiting to enter the cache enters it before its blocks go back: SGLang
    // caches a finished or retracted request's tokens, never drops them.
    if (seq.storePending) {
      seq.storePending = false;
      this.#storeBlocks(seq);
    }
    this.#pool.release(seq.blockIds);
    seq.blockIds = [];
    seq.blockCount = 0;
    seq.storedBlocks = 0;
  }

  /** Removes finished requests from the running list, in place, keeping the order. */
  #dropFinished(): void {
    const running = this.#running;
    let kept = 0;
    for (let i = 0; i < running.length; i++) {
      const seq = running[i]!;
      if (seq.status === 'running') running[kept++] = seq;
    }
    running.length = kept;
  }
}

/** One request more or fewer for `lora` (null: the base model, not counted). */
function countLora(counts: Map<string, number>, lora: string | null, delta: 1 | -1): void {
  if (lora === null) return;
  const n = (counts.get(lora) ?? 0) + delta;
  if (n > 0) counts.set(lora, n);
  else counts.delete(lora);
}

function finishedRecord(seq: Seq, reason: SeqFinished['reason']): SeqFinished {
  return {
    id: seq.id,
    promptTokens: seq.promptTokens,
    cachedTokens: seq.cachedTokens,
    outputTokens: seq.generatedTokens,
    reason,
    // Only for a prompt prefilled in several chunks: records of one-chunk prompts as before.
    ...(seq.resumedPrefixTokens > 0 && { resumedPrefixTokens: seq.resumedPrefixTokens }),
  };
}

function checkRequest(req: SchedRequest, blockSize: number): void {
  const why = badRequestReason(req, blockSize);
  if (why !== null) throw new EngineError('ERR_INVALID_REQUEST', `${req.id}: ${why}`);
}

/** What is wrong with a request, or null (no closure per request: the loader names each). */
function badRequestReason(req: SchedRequest, blockSize: number): string | null {
  if (!Number.isInteger(req.promptTokens) || req.promptTokens < 1) {
    return `prompt must have at least 1 token, got ${req.promptTokens}`;
  }
  if (!Number.isInteger(req.maxNewTokens) || req.maxNewTokens < 1) {
    return `maxNewTokens must be an integer >= 1, got ${req.maxNewTokens}`;
  }
  if (req.blockKeys !== undefined) {
    if (req.tokenIds?.length !== req.promptTokens) return 'blockKeys need the prompt token ids';
    if (req.blockKeys.length !== Math.floor(req.promptTokens / blockSize)) {
      return `expected ${Math.floor(req.promptTokens / blockSize)} block keys`;
    }
  }
  return null;
}
