/**
 * `cost`, the router seed's rule: send the request where it adds the least prefill work.
 *
 *   cost(r) [tokens] = queue(r) + uncached(r)
 *   queue(r)    = prompt tokens already queued on r (not yet prefilled), and
 *   uncached(r) = promptTokens - cachedTokens(r), this request's prompt not cached on r.
 *
 * Multiply by prefill time per token (71.3 us for Llama 3.3 70B on TP=2 H200) for time. The
 * minimum wins; equal costs go to the shorter queue, then to a seeded draw. So a replica holding
 * a 6,000-token shared prefix keeps winning while its extra queue is under the 6,000 tokens its
 * hit saves and loses the moment it is not; the spill then warms a second owner.
 *
 * queueSource 'ledger' (default) reads the router's own ledger, which is exact and never stale.
 * 'reports' reads the engine's last report: its queued prompt tokens, or, when it sends only a
 * count, waiting x this request's promptTokens; 0 before the first report. Reports lag, so many
 * requests routed between two reports all see the same idle replica (herding): kept to show it.
 * A missing cache signal (no index entries) makes uncached(r) = promptTokens everywhere, and
 * the rule degrades to least queued prompt tokens.
 *
 * LoRA. A request for an adapter adds, where the adapter is not resident, its load time in
 * prefill tokens (loraLoadTokens = loadMs / prefill ms per token; 1,177 for the seed replica):
 *
 *   cost(r) = queue(r) + uncached(r) + (resident(r) ? 0 : loraLoadTokens)
 *
 * and the router offers only replicas with a free adapter slot while any has one (loraAware).
 * uncached(r) is already the adapter's own: its blocks are keyed with its name. A request
 * without an adapter costs exactly the seed's formula. `loraBlind` drops both the term and the
 * slot guard (the baseline the simulator compares against).
 *
 * CPU tier. Cached tokens that only the replica's CPU tier holds count as their reload, not as a
 * hit: uncached(r) + cpuReloadTokens (cpuHitCredit.ts), a CPU hit between a GPU hit and a miss.
 */
import { DEFAULT_LORA_LOAD_TOKENS, type QueueSource } from '../defaults.ts';
import type { Rng } from '../../util/rng.ts';
import type { Pick, PickInput, Policy, ReplicaView, RouteRequest } from '../policy.ts';
import { type CpuHitOptions, cpuReloadTokens } from './cpuHitCredit.ts';
import { argMin } from './pickBest.ts';

export interface CostOptions extends CpuHitOptions {
  queueSource?: QueueSource;
  /** A LoRA adapter's load time in prefill tokens (default DEFAULT_LORA_LOAD_TOKENS). */
  loraLoadTokens?: number;
  /** Ignore adapters: no load term, no slot guard (every LoRA-aware policy reads it). */
  loraBlind?: boolean;
}

export class CostPolicy implements Policy {
  readonly name = 'cost';
  readonly queueSource: QueueSource;
  readonly loraAware: boolean;
  readonly loraLoadTokens: number;
  readonly cpuReloadUsPerToken: number | undefined;
  readonly prefillUsPerToken: number | undefined;

  constructor(options: CostOptions = {}) {
    this.cpuReloadUsPerToken = options.cpuReloadUsPerToken;
    this.prefillUsPerToken = options.prefillUsPerToken;
    this.queueSource = options.queueSource ?? 'ledger';
    this.loraAware = !options.loraBlind;
    this.loraLoadTokens = options.loraLoadTokens ?? DEFAULT_LORA_LOAD_TOKENS;
  }

  // Reused by every pick, overwritten in place: the router reads a pick's scores before the
  // next one (`Pick.scores`), and two fresh arrays the fleet's size were a route's cost too.
  readonly #scores: number[] = [];
  readonly #queues: number[] = [];

  pick(input: PickInput): Pick {
    const { candidates, request } = input;
    const scores = this.#scores;
    const queues = this.#queues;
    const adapter = this.loraAware && request.lora ? this.loraLoadTokens : 0;
    for (let i = 0; i < candidates.length; i++) {
      const c = candidates[i]!;
      const queue = this.#queueTokens(c, request.promptTokens);
      queues[i] = queue;
      const load = adapter > 0 && !c.lora.resident ? adapter : 0;
      const reload = cpuReloadTokens(
        c.cpuCachedTokens,
        this.cpuReloadUsPerToken,
        this.prefillUsPerToken,
      );
      scores[i] = queue + (request.promptTokens - c.cachedTokens) + reload + load;
    }
    cutTo(scores, candidates.length);
    cutTo(queues, candidates.length);
    return { replicaId: candidates[argMin(scores, input.rng, queues)]!.id, scores };
  }

  /**
   * `pick` over candidates `ids[0..count)` that have no adapter to load and no tokens cached in
   * a CPU tier, with queueSource 'ledger', scored from the router's arrays by replica id (the
   * ledger's queued prompt tokens, the walk's matched blocks) instead of from views: the same
   * scores, ties and draws as `pick` over those candidates' views in the same order (a property
   * test holds the two to each other). The router takes this path where it applies
   * (`readsArrays`), so that a route over a wide fleet reads no object per replica.
   */
  pickFromArrays(
    ids: ArrayLike<number>,
    count: number,
    queued: ArrayLike<number>,
    matchedBlocks: ArrayLike<number>,
    request: RouteRequest,
    rng: Rng,
  ): Pick {
    const scores = this.#scores;
    const queues = this.#queues;
    const { promptTokens, blockSize } = request;
    for (let i = 0; i < count; i++) {
      const id = ids[i]!;
      const queue = queued[id]!;
      queues[i] = queue;
      scores[i] = queue + (promptTokens - Math.min(promptTokens, matchedBlocks[id]! * blockSize));
    }
    cutTo(scores, count);
    cutTo(queues, count);
    return { replicaId: ids[argMin(scores, rng, queues)]!, scores };
  }

  /** Whether `pickFromArrays` gives this policy's picks (it reads the ledger's queues). */
  get readsArrays(): boolean {
    return this.queueSource === 'ledger';
  }

  #queueTokens(c: ReplicaView, promptTokens: number): number {
    if (this.queueSource === 'ledger') return c.queuedPromptTokens;
    return c.reportedQueuedPromptTokens ?? c.waiting * promptTokens;
  }
}

/** Cuts a reused array to `length`; a length set is a call out of compiled code even when equal. */
function cutTo(array: number[], length: number): void {
  if (array.length !== length) array.length = length;
}
