/**
 * A pool's load as the flow-control core reads it (`src/flow/saturation.ts`), from the pool's
 * router: each replica's guard verdict (eligible: healthy, a fresh report, KV under the router's
 * threshold), its engine's waiting requests and KV usage from its last report, and the queue the
 * router itself put there (its ledger's prompt tokens whose first token has not come back),
 * priced in ms of prefill at the served model's cost, as the `--max-queue-ms` bound prices it.
 * The ledger moves with every request routed, so a burst is seen before the next scrape.
 */
import type { PoolLoadView, SaturationLimits } from '../flow/index.ts';
import type { FlowSaturationConfig } from './flowConfig.ts';
import type { ModelPool } from './pool.ts';

export function poolLoadView(
  pool: Pick<ModelPool, 'router'>,
  nowMs: number,
  prefillUsPerToken: number,
): PoolLoadView {
  return {
    replicas: pool.router.snapshot(nowMs).replicas.map((r) => ({
      eligible: r.verdict === 'eligible',
      ...(r.waiting !== null && { waitingRequests: r.waiting }),
      ...(r.kvUsage !== null && { kvUsage: r.kvUsage }),
      queuedPromptTokens: r.queuedPromptTokens,
      queuedPrefillMs: (r.queuedPromptTokens * prefillUsPerToken) / 1000,
    })),
  };
}

/** The config's saturation settings as the core's limits. */
export function saturationLimits(s: FlowSaturationConfig): SaturationLimits {
  return {
    maxWaitingRequests: s.queueDepth,
    maxKvUsage: s.kvUsage,
    maxQueuedPrefillMs: s.queuedPrefillMs,
  };
}
