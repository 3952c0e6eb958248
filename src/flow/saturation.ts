/**
 * Is the pool saturated? The signal that makes flow control hold requests back instead of
 * sending them to engines that are already full.
 *
 * The rule is llm-d's saturation detector (kubernetes-sigs/gateway-api-inference-extension,
 * `pkg/epp/saturationdetector/saturationdetector.go`, `IsSaturated`): the pool is saturated when
 * **no** replica has "good capacity", and a replica has good capacity when its metrics are fresh,
 * its waiting queue is at or under `QueueDepthThreshold` and its KV usage at or under
 * `KVCacheUtilThreshold`; an empty pool is saturated. Its defaults (`config.go`): 5 waiting
 * requests, KV usage 0.8, metrics at most 200 ms old.
 *
 * kvroute reads the router's own view of each replica rather than scraped gauges alone, and adds
 * the queue the router itself has put on a replica (its ledger: prompt tokens routed there
 * whose first token has not come back, or the same priced in ms of modelled prefill):
 *
 *   goodCapacity(r) = r.eligible
 *                     and r.waitingRequests <= maxWaitingRequests
 *                     and r.kvUsage <= maxKvUsage
 *                     and r.queuedPrefillMs <= maxQueuedPrefillMs       (when both are given)
 *                     and r.queuedPromptTokens <= maxQueuedPromptTokens (when both are given)
 *   saturated = no replica has good capacity
 *
 * `eligible` carries freshness and health: the router's guards (healthy, a fresh report, not
 * draining) decide it, as stale metrics do in llm-d. A limit left out is not checked; a signal a
 * replica does not report (undefined) passes its check, so a pool whose engines report no KV
 * usage is judged on its queues alone.
 */

export interface ReplicaLoad {
  /** Passed the router's guards: healthy, fresh report, accepting work. */
  eligible: boolean;
  /** Requests waiting in the engine's own queue (vLLM's num_requests_waiting). */
  waitingRequests?: number;
  /** KV cache usage, 0..1. */
  kvUsage?: number;
  /** Prompt tokens routed to the replica whose first token has not come back. */
  queuedPromptTokens?: number;
  /** The same queue priced at the replica's prefill speed, in ms. */
  queuedPrefillMs?: number;
  /** That price: ms of prefill per prompt token (finish-first dispatch, `ownerRelease.ts`). */
  prefillMsPerToken?: number;
}

export interface PoolLoadView {
  replicas: readonly ReplicaLoad[];
}

export interface SaturationLimits {
  maxWaitingRequests?: number;
  maxKvUsage?: number;
  maxQueuedPromptTokens?: number;
  maxQueuedPrefillMs?: number;
}

/** llm-d's defaults (`pkg/epp/saturationdetector/config.go`). */
export const DEFAULT_SATURATION_LIMITS: Readonly<SaturationLimits> = {
  maxWaitingRequests: 5,
  maxKvUsage: 0.8,
};

function within(value: number | undefined, limit: number | undefined): boolean {
  return value === undefined || limit === undefined || value <= limit;
}

export function hasGoodCapacity(r: ReplicaLoad, limits: SaturationLimits): boolean {
  return (
    r.eligible &&
    within(r.waitingRequests, limits.maxWaitingRequests) &&
    within(r.kvUsage, limits.maxKvUsage) &&
    within(r.queuedPromptTokens, limits.maxQueuedPromptTokens) &&
    within(r.queuedPrefillMs, limits.maxQueuedPrefillMs)
  );
}

export function isPoolSaturated(view: PoolLoadView, limits: SaturationLimits): boolean {
  for (const r of view.replicas) if (hasGoodCapacity(r, limits)) return false;
  return true;
}
