/**
 * A pool's load as the flow-control core reads it (`src/flow/saturation.ts`), from the pool's
 * router: each replica's guard verdict (eligible: healthy, a fresh report, KV under the router's
 * threshold), its engine's waiting requests and KV usage from its last report, and the queue the
 * router itself put there (its ledger's prompt tokens whose first token has not come back),
 * priced in ms of prefill at the served model's cost, as the `--max-queue-ms` bound prices it.
 * The ledger moves with every request routed, so a burst is seen before the next scrape.
 */
import {
  hasGoodCapacity,
  type OwnerReleaseOptions,
  ownerReady,
  type PoolLoadView,
  type ReplicaLoad,
  type SaturationLimits,
} from '../flow/index.ts';
import type { FlowSaturationConfig } from './flowConfig.ts';
import type { FlowReadiness } from './flowGate.ts';
import type { ModelPool } from './pool.ts';

export function poolLoadView(
  pool: Pick<ModelPool, 'router'>,
  nowMs: number,
  prefillUsPerToken: number,
): PoolLoadView & { names: string[]; ids: number[] } {
  const replicas: ReplicaLoad[] = [];
  const names: string[] = [];
  const ids: number[] = [];
  for (const r of pool.router.snapshot(nowMs).replicas) {
    names.push(r.name);
    ids.push(r.id);
    replicas.push({
      eligible: r.verdict === 'eligible',
      ...(r.waiting !== null && { waitingRequests: r.waiting }),
      ...(r.kvUsage !== null && { kvUsage: r.kvUsage }),
      queuedPromptTokens: r.queuedPromptTokens,
      queuedPrefillMs: (r.queuedPromptTokens * prefillUsPerToken) / 1000,
    });
  }
  return { replicas, names, ids };
}

/**
 * Owner release's readiness over the pool's load now (`src/flow/ownerRelease.ts`): what each
 * replica caches of a prompt is the router's view (`Router.prefixBlocks`: its index as `route`
 * matches it, a read that moves nothing), capped at the prompt's tokens; a request whose prompt
 * is not known is ready wherever there is room.
 */
export function ownerReadiness(
  pool: Pick<ModelPool, 'router'>,
  view: PoolLoadView & { ids: number[] },
  limits: SaturationLimits,
  nowMs: number,
  options: OwnerReleaseOptions,
): FlowReadiness {
  const eligible = view.replicas.map((r) => r.eligible);
  const room = view.replicas.map((r) => hasGoodCapacity(r, limits));
  const anyRoom = room.some(Boolean);
  return (req, waitedMs) => {
    if (req.prefix === undefined) return anyRoom;
    const { blockKeys, blockSize } = req.prefix;
    const blocks = pool.router.prefixBlocks(blockKeys, nowMs);
    const cached = view.ids.map((id) => Math.min((blocks[id] ?? 0) * blockSize, req.costTokens));
    return ownerReady(cached, eligible, room, waitedMs, options);
  };
}

/**
 * The replicas without room, which a request flow control lets through is not routed to (as
 * llm-d's scheduler filters run after its flow controller); empty when none has room (the
 * router then chooses among all).
 */
export function replicasWithoutRoom(
  view: PoolLoadView & { names: string[] },
  limits: SaturationLimits,
): string[] {
  const without: string[] = [];
  view.replicas.forEach((r, i) => {
    if (!hasGoodCapacity(r, limits)) without.push(view.names[i]!);
  });
  return without.length === view.replicas.length ? [] : without;
}

/** The config's saturation settings as the core's limits. */
export function saturationLimits(s: FlowSaturationConfig): SaturationLimits {
  return {
    maxWaitingRequests: s.queueDepth,
    maxKvUsage: s.kvUsage,
    maxQueuedPrefillMs: s.queuedPrefillMs,
  };
}
