/**
 * `delay-cost`, the default: the seed's cost rule in time, with a spill charged for the delay
 * its extra prefill puts on the requests that will queue behind it, and with the wait for a
 * sequence slot.
 *
 *   score(r) [ms] = (queue(r) + uncached(r) + extra(r) x followers(r)) x p + slotWait(r)
 *
 *   p             prefill time per token, ms (71.3 us for Llama 3.3 70B on TP=2 H200)
 *   queue(r)      uncached prompt tokens already queued on r (router ledger), as in `cost`, plus
 *                 r's running decodes in the same unit (decodeWork.ts): each step the new
 *                 request waits through also computes one token per decode, which costs
 *                 `decodeCostTokens` prompt tokens (0 by default: a GPU's mixed step; tens on
 *                 a CPU engine)
 *   uncached(r)   promptTokens - cachedTokens(r), as in `cost`
 *   extra(r)      uncached(r) - the fewest uncached tokens on any candidate: prefill that exists
 *                 only because the request left its best-cached replica (0 on an owner)
 *   followers(r)  requests that will wait behind that extra prefill on r:
 *                 load(r) + prefill(r) + Lq(inFlight(r))
 *     load(r)       inFlight(r) / maxSeqs, r's share of busy sequence slots: the chance that
 *                   its next request arrives while the extra prefill still runs
 *     prefill(r)    requests on r whose first token has not come back (ledger): as many again
 *                   will queue behind the new one while it waits (Little's law)
 *     Lq(k)         mean M/M/c queue length at load k / c, c = maxSeqs (load at most 0.95):
 *                   about 0 below ~85 % of the slots, then steep. Extra prefill on a replica
 *                   whose slots are nearly full stretches its decodes, so later requests wait
 *                   for slots
 *   slotWait(r)   max(0, inFlight(r) + 1 - maxSeqs) x decodeMs / maxSeqs: the completions r
 *                 needs before it can admit one more sequence, about decodeMs / maxSeqs apart;
 *                 decodeMs is the mean first-token-to-finish time of finished requests (an
 *                 exponential average), or the age of the oldest running decode before any
 *
 * The minimum wins; ties to the shorter queue, then a seeded draw. Where a spill would land on
 * an idle replica this is `cost`: the owner keeps a prefix while its extra queue is under the
 * prefill a hit saves. Where requests already wait, each of them charges the spill's extra
 * prefill once more, so as the fleet fills up spills stop and a cold start or a burst is
 * absorbed by the owners instead of multiplied by cold prefills; and a replica out of slots
 * sheds new work to one with free slots, which `cost` does not see.
 *
 * Missing signals: without `maxSeqs` (engine limit unknown) load, Lq and slotWait are 0 and the
 * rule works on prefill alone (followers = prefill(r)); before any decode has run slotWait is 0.
 * Without cache information extra(r) is 0 everywhere: least queued prompt tokens, as `cost`.
 *
 * Mixed fleets: a replica whose view carries a speed (replicaSpeed.ts) is scored with its own p
 * (speed.prefillMsPerToken), and its slotWait with decodeMs in units of its own decode step:
 * each finished request's decode time is divided by its replica's decodeBaseMs before it enters
 * the running mean, and multiplied back by the candidate's. Without speeds both are the
 * fleet-wide figures above, so one hardware class scores as it always did. The token terms
 * (queue, uncached, extra) are counted in tokens and priced at the candidate's p: a spill to a
 * faster replica costs less time than the same tokens on a slower one.
 *
 * LoRA, as in `cost`: a request for an adapter adds, where the adapter is not resident, its load
 * time (loraLoadTokens x p), and the router offers only replicas with a free adapter slot while
 * any has one (loraAware); `loraBlind` drops both.
 *
 * CPU tier, as in `cost`: tokens only the replica's CPU tier holds count in uncached(r) as their
 * reload time over p (cpuHitCredit.ts).
 */
import { DEFAULT_LORA_LOAD_TOKENS, DEFAULT_PREFILL_US_PER_TOKEN } from '../defaults.ts';
import type { Pick, PickInput, Policy, ReplicaView } from '../policy.ts';
import { type CpuHitOptions, cpuReloadTokens } from './cpuHitCredit.ts';
import { decodeQueueTokens } from './decodeWork.ts';
import { argMin } from './pickBest.ts';

/** Llama 3.3 70B, FP8 weights, TP=2 H200 at 50 % MFU: the router seed's figure (defaults.ts). */
export { DEFAULT_PREFILL_US_PER_TOKEN };
/** Highest slot load the queue-length table uses (Lq grows without bound at 1). */
export const DEFAULT_MAX_SLOT_LOAD = 0.95;
/** Weight of each new decode time in the running mean. */
export const DEFAULT_DECODE_MS_SMOOTHING = 1 / 32;
/** Tokens per step assumed for the decode term when the engines' budget is not given (vLLM's 2,048). */
export const DEFAULT_DECODE_BUDGET_TOKENS = 2048;

export interface DelayCostOptions extends CpuHitOptions {
  /** Prefill time per prompt token on a replica, in microseconds. */
  prefillUsPerToken?: number;
  /** Running sequences an engine admits at most (vLLM max_num_seqs); unknown when absent. */
  maxSeqs?: number;
  /** A LoRA adapter's load time in prefill tokens (default DEFAULT_LORA_LOAD_TOKENS). */
  loraLoadTokens?: number;
  /** Ignore adapters: no load term, no slot guard. */
  loraBlind?: boolean;
  /**
   * Prompt tokens of step time one running decode adds to each step (decodeWork.ts); 0 or
   * absent: decodes are not counted (a GPU's compute-bound mixed step).
   */
  decodeCostTokens?: number;
  /** The engines' tokens per step, for the decode term (default DEFAULT_DECODE_BUDGET_TOKENS). */
  budgetTokens?: number;
}

export class DelayCostPolicy implements Policy {
  readonly name = 'delay-cost';
  readonly prefillMsPerToken: number;
  readonly maxSeqs: number | undefined;
  readonly loraAware: boolean;
  readonly loraLoadTokens: number;
  readonly cpuReloadUsPerToken: number | undefined;
  readonly decodeCostTokens: number;
  readonly budgetTokens: number;
  /** Mean slot queue length by in-flight requests, 0..maxSeqs. */
  readonly #slotQueue: Float64Array;
  /** First-token time of each request still decoding, oldest first (insertion order). */
  readonly #firstTokenMs = new Map<string, number>();
  /** Running mean decode time, in ms divided by the replica's decode scale (1 without speeds). */
  #decodeMs: number | undefined;
  /** Decode scale (speed.decodeBaseMs) of replicas seen with a speed, by id. */
  readonly #decodeScale = new Map<number, number>();

  constructor(options: DelayCostOptions = {}) {
    this.prefillMsPerToken = (options.prefillUsPerToken ?? DEFAULT_PREFILL_US_PER_TOKEN) / 1000;
    this.loraAware = !options.loraBlind;
    this.loraLoadTokens = options.loraLoadTokens ?? DEFAULT_LORA_LOAD_TOKENS;
    this.cpuReloadUsPerToken = options.cpuReloadUsPerToken;
    const cost = options.decodeCostTokens ?? 0;
    this.decodeCostTokens = Number.isFinite(cost) && cost > 0 ? cost : 0;
    const budget = options.budgetTokens ?? DEFAULT_DECODE_BUDGET_TOKENS;
    this.budgetTokens =
      Number.isFinite(budget) && budget >= 1 ? budget : DEFAULT_DECODE_BUDGET_TOKENS;
    const maxSeqs = options.maxSeqs;
    this.maxSeqs =
      maxSeqs !== undefined && Number.isInteger(maxSeqs) && maxSeqs >= 1 ? maxSeqs : undefined;
    this.#slotQueue =
      this.maxSeqs === undefined
        ? new Float64Array(1)
        : slotQueueLengths(this.maxSeqs, DEFAULT_MAX_SLOT_LOAD);
  }

  /**
   * Mean first-token-to-finish time so far, ms (in a mixed fleet: in units of a replica's decode
   * step, decodeBaseMs); undefined before the first completion.
   */
  get decodeMs(): number | undefined {
    return this.#decodeMs;
  }

  pick(input: PickInput): Pick {
    const { candidates, request } = input;
    const promptTokens = request.promptTokens;
    // No closures here: the loader names each closure it makes, once per pick.
    let fewestUncached = promptTokens;
    for (let i = 0; i < candidates.length; i++) {
      fewestUncached = Math.min(fewestUncached, this.#uncached(candidates[i]!, promptTokens));
    }
    const maxSeqs = this.maxSeqs;
    const slotGapMs = maxSeqs === undefined ? 0 : this.#decodeEstimateMs(input.nowMs) / maxSeqs;
    const lastSlot = this.#slotQueue.length - 1;
    const adapter = this.loraAware && request.lora ? this.loraLoadTokens : 0;
    const scores = new Array<number>(candidates.length);
    const queues = new Array<number>(candidates.length);
    for (let i = 0; i < candidates.length; i++) {
      const c = candidates[i]!;
      const speed = c.speed;
      const p = this.#prefillMsPerToken(c);
      let gapMs = slotGapMs;
      if (speed !== undefined) {
        this.#decodeScale.set(c.id, speed.decodeBaseMs);
        // The mean is in decode steps once a finished request has been scaled (see onFinished).
        if (this.#decodeMs !== undefined) gapMs = slotGapMs * speed.decodeBaseMs;
      }
      const uncached = this.#uncached(c, promptTokens);
      const extra = uncached - fewestUncached;
      const slotWaitMs = maxSeqs === undefined ? 0 : Math.max(0, c.inFlight + 1 - maxSeqs) * gapMs;
      const slotLoad = maxSeqs === undefined ? 0 : Math.min(1, c.inFlight / maxSeqs);
      const followers =
        slotLoad + c.prefillRequests + this.#slotQueue[Math.min(c.inFlight, lastSlot)]!;
      const queue =
        c.queuedPromptTokens +
        decodeQueueTokens({
          decodes: c.decodeRequests,
          aheadTokens: c.queuedPromptTokens + uncached,
          decodeCostTokens: this.decodeCostTokens,
          budgetTokens: this.budgetTokens,
        });
      queues[i] = queue;
      const load = adapter > 0 && !c.lora.resident ? adapter : 0;
      scores[i] = (queue + uncached + load + extra * followers) * p + slotWaitMs;
    }
    return { replicaId: candidates[argMin(scores, input.rng, queues)]!.id, scores };
  }

  /** A candidate's prefill ms per token: its own speed's, else the fleet's. */
  #prefillMsPerToken(c: ReplicaView): number {
    return c.speed?.prefillMsPerToken ?? this.prefillMsPerToken;
  }

  /** Prompt tokens a candidate would compute: its uncached ones and its CPU tier's reload. */
  #uncached(c: ReplicaView, promptTokens: number): number {
    const reloadUsPerToken = this.#prefillMsPerToken(c) * 1000;
    return (
      promptTokens -
      c.cachedTokens +
      cpuReloadTokens(c.cpuCachedTokens, this.cpuReloadUsPerToken, reloadUsPerToken)
    );
  }

  onFirstToken(requestId: string, _replicaId: number, nowMs: number): void {
    this.#firstTokenMs.set(requestId, nowMs);
  }

  onFinished(requestId: string, replicaId: number, nowMs: number): void {
    const firstMs = this.#firstTokenMs.get(requestId);
    if (firstMs === undefined) return;
    this.#firstTokenMs.delete(requestId);
    const scale = this.#decodeScale.get(replicaId);
    const sampleMs = scale === undefined ? nowMs - firstMs : (nowMs - firstMs) / scale;
    this.#decodeMs =
      this.#decodeMs === undefined
        ? sampleMs
        : this.#decodeMs + DEFAULT_DECODE_MS_SMOOTHING * (sampleMs - this.#decodeMs);
  }

  /**
   * Mean decode time; before any completion, the oldest running decode's age (a floor, in ms on
   * whichever replica it runs).
   */
  #decodeEstimateMs(nowMs: number): number {
    if (this.#decodeMs !== undefined) return this.#decodeMs;
    const oldest = this.#firstTokenMs.values().next();
    return oldest.done ? 0 : Math.max(0, nowMs - oldest.value);
  }
}

/**
 * Mean queue length of an M/M/c queue (c servers) at load k / c, for k = 0..c, the load capped
 * at `maxLoad`: Lq = C(c, a) x load / (1 - load), with a = load x c and C the Erlang C
 * probability of waiting, from the Erlang B recursion B(j) = a B(j-1) / (j + a B(j-1)).
 */
export function slotQueueLengths(c: number, maxLoad: number): Float64Array {
  const out = new Float64Array(c + 1);
  for (let k = 0; k <= c; k++) {
    const load = Math.min(maxLoad, k / c);
    const a = load * c;
    let erlangB = 1;
    for (let j = 1; j <= c; j++) erlangB = (a * erlangB) / (j + a * erlangB);
    const waitProbability = (c * erlangB) / (c - a * (1 - erlangB));
    out[k] = (waitProbability * load) / (1 - load);
  }
  return out;
}
