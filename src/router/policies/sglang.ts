/**
 * `sglang`, the SGLang model gateway's cache_aware policy as its command line starts it
 * (sgl-project/sglang, sgl-model-gateway/src/policies/cache_aware.rs, select_worker; the
 * defaults are the command line's, sgl-model-gateway/src/main.rs: --cache-threshold 0.3,
 * --balance-abs-threshold 64, --balance-rel-threshold 1.5, --max-tree-size 67108864,
 * --eviction-interval 120; the library's CacheAwareConfig::default in policies/mod.rs differs,
 * 0.5 / 32 / 1.1, and is not what `smg launch` runs), with load = in-flight requests (the
 * gateway's own count, the router ledger here):
 * 1. imbalanced when max - min > 64 and max > 1.5 x min: the least loaded replica;
 * 2. otherwise, if the best prefix match rate (matched blocks / prompt blocks; the gateway
 *    counts characters) exceeds 0.3: that replica;
 * 3. otherwise the least loaded.
 * Matches come from its own approximate record of what it sent where (as the gateway's radix
 * tree, never from engine events), LRU-bounded per replica: the tree's 67,108,864 characters,
 * about 16.8 M tokens at 4 characters a token, are 1,048,576 blocks of 16 per worker, so in
 * practice it forgets nothing the engines evict. With `treeForgetting` (`sim --approx-forget`) it
 * forgets as approxForgetting.ts's `sglang` mode says instead: a periodic sweep down to a bound.
 *
 * The gateway filters only unhealthy workers (get_healthy_worker_indices): no KV usage, no
 * report age. This policy sets `ownFilters`, and the router offers it every replica that is up.
 */
import type { ApproxForgetting } from '../index/approxForgetting.ts';
import { ApproxIndex } from '../index/approxIndex.ts';
import { matchPrefix, replicaMask } from '../index/prefixMatch.ts';
import type { Pick, PickInput, Routed } from '../policy.ts';
import { PeerPolicy } from './peerPolicy.ts';
import { argMax, argMin } from './pickBest.ts';

/**
 * The gateway's thresholds and tree size, each an option of the same name. The tree's blocks
 * per worker: --max-tree-size 67,108,864 characters / 4 per token / 16 tokens a block.
 */
const SGLANG_DEFAULTS = {
  balanceAbsThreshold: 64,
  balanceRelThreshold: 1.5,
  cacheThreshold: 0.3,
  treeBlocks: 1_048_576,
};

export interface SglangOptions extends Partial<typeof SGLANG_DEFAULTS> {
  /** How the tree forgets (brings its own size); default LRU at `treeBlocks` per route. */
  treeForgetting?: ApproxForgetting;
}

export class SglangPolicy extends PeerPolicy<typeof SGLANG_DEFAULTS> {
  readonly name = 'sglang';
  #tree: ApproxIndex;

  constructor(options: SglangOptions = {}) {
    super(SGLANG_DEFAULTS, options);
    this.#tree = new ApproxIndex(0, this.tunables.treeBlocks, 0, options.treeForgetting);
  }

  pick(input: PickInput): Pick {
    const { candidates, request, rng } = input;
    const { balanceAbsThreshold, balanceRelThreshold, cacheThreshold } = this.tunables;
    const loads = candidates.map((c) => c.inFlight);
    const maxLoad = Math.max(...loads);
    const minLoad = Math.min(...loads);
    const leastLoaded = (): Pick => ({
      replicaId: candidates[argMin(loads, rng)]!.id,
      scores: loads,
    });
    if (maxLoad - minLoad > balanceAbsThreshold && maxLoad > balanceRelThreshold * minLoad) {
      return leastLoaded();
    }
    const blocks = request.blockKeys.length;
    if (blocks === 0) return leastLoaded();
    this.#tree.ensureReplicas(input.fleet.length);
    this.#tree.forget(input.nowMs);
    const matched = new Int32Array(input.fleet.length);
    const alive = replicaMask(
      candidates.map((c) => c.id),
      this.#tree.blocks.words,
    );
    matchPrefix(this.#tree.blocks, null, request.blockKeys, alive, input.nowMs, matched);
    const rates = candidates.map((c) => matched[c.id]! / blocks);
    const best = argMax(rates, rng, loads);
    if (rates[best]! > cacheThreshold) return { replicaId: candidates[best]!.id, scores: rates };
    return leastLoaded();
  }

  onRouted(routed: Routed): void {
    this.#tree.ensureReplicas(routed.replicaId + 1);
    this.#tree.recordRoute(routed.replicaId, routed.request.blockKeys, routed.nowMs);
  }

  onReplicaRemoved(replicaId: number): void {
    this.#tree.clearReplica(replicaId);
  }
}

/** Each default under a name of its own. */
export const {
  balanceAbsThreshold: DEFAULT_SGLANG_BALANCE_ABS_THRESHOLD,
  balanceRelThreshold: DEFAULT_SGLANG_BALANCE_REL_THRESHOLD,
  cacheThreshold: DEFAULT_SGLANG_CACHE_THRESHOLD,
  treeBlocks: DEFAULT_SGLANG_TREE_BLOCKS,
} = SGLANG_DEFAULTS;
