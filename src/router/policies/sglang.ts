/**
 * `sglang`, the SGLang model gateway's cache_aware policy, with load = in-flight requests
 * (router ledger):
 * 1. imbalanced when max - min > 64 and max > 1.5 x min: the least loaded replica;
 * 2. otherwise, if the best prefix match rate (matched blocks / prompt blocks) exceeds 0.3:
 *    that replica;
 * 3. otherwise the least loaded.
 * Matches come from its own approximate record of what it sent where (as the gateway's radix
 * tree, never from engine events), LRU-bounded per replica; with `treeForgetting`, bounded as the
 * SGLang router bounds it (approxForgetting.ts: a 60 s sweep down to max_tree_size).
 */
import type { ApproxForgetting } from '../approxForgetting.ts';
import { ApproxIndex } from '../approxIndex.ts';
import type { Pick, PickInput, Policy, Routed } from '../policy.ts';
import { matchPrefix, replicaMask } from '../prefixMatch.ts';
import { argMax, argMin } from './pickBest.ts';

export const DEFAULT_SGLANG_BALANCE_ABS_THRESHOLD = 64;
export const DEFAULT_SGLANG_BALANCE_REL_THRESHOLD = 1.5;
export const DEFAULT_SGLANG_CACHE_THRESHOLD = 0.3;
/** Blocks remembered per worker: about two KV pools of the seed's replica. */
export const DEFAULT_SGLANG_TREE_BLOCKS = 65_536;

export interface SglangOptions {
  balanceAbsThreshold?: number;
  balanceRelThreshold?: number;
  cacheThreshold?: number;
  treeBlocks?: number;
  /** How the tree forgets (brings its own size); default LRU at `treeBlocks` per route. */
  treeForgetting?: ApproxForgetting;
}

export class SglangPolicy implements Policy {
  readonly name = 'sglang';
  readonly balanceAbsThreshold: number;
  readonly balanceRelThreshold: number;
  readonly cacheThreshold: number;
  #tree: ApproxIndex;

  constructor(options: SglangOptions = {}) {
    this.balanceAbsThreshold = options.balanceAbsThreshold ?? DEFAULT_SGLANG_BALANCE_ABS_THRESHOLD;
    this.balanceRelThreshold = options.balanceRelThreshold ?? DEFAULT_SGLANG_BALANCE_REL_THRESHOLD;
    this.cacheThreshold = options.cacheThreshold ?? DEFAULT_SGLANG_CACHE_THRESHOLD;
    this.#tree = new ApproxIndex(
      0,
      options.treeBlocks ?? DEFAULT_SGLANG_TREE_BLOCKS,
      0,
      options.treeForgetting,
    );
  }

  pick(input: PickInput): Pick {
    const { candidates, request, rng } = input;
    const loads = candidates.map((c) => c.inFlight);
    const maxLoad = Math.max(...loads);
    const minLoad = Math.min(...loads);
    const leastLoaded = (): Pick => ({
      replicaId: candidates[argMin(loads, rng)]!.id,
      scores: loads,
    });
    if (
      maxLoad - minLoad > this.balanceAbsThreshold &&
      maxLoad > this.balanceRelThreshold * minLoad
    ) {
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
    if (rates[best]! > this.cacheThreshold)
      return { replicaId: candidates[best]!.id, scores: rates };
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
