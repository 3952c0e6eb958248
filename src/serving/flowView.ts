/**
 * A pool's load as the flow-control core reads it (`src/flow/saturation.ts`), from the pool's
 * router: each replica's guard verdict (eligible: healthy, a fresh report, KV under the router's
 * threshold), its engine's waiting requests and KV usage from its last report, and the queue the
 * router itself put there (its ledger's prompt tokens whose first token has not come back),
 * priced in ms of prefill at the served model's cost, as the `--max-queue-ms` bound prices it.
 * The ledger moves with every request routed, so a burst is seen before the next scrape.
 */
import {
  type FinishFirstReplica,
  type FlowCharge,
  finishFirstReplica,
  hasGoodCapacity,
  type OwnerReleaseOptions,
  ownerVerdict,
  type PoolLoadView,
  type ReplicaLoad,
  type SaturationLimits,
  uncachedCharge,
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

/** Owner release's settings in the gateway and the picker (`FlowControlConfig`). */
export interface OwnerPassOptions extends OwnerReleaseOptions {
  /** A sparse tenant's request goes where its prefill ends first (`finishFirstReplica`). */
  finishFirst: boolean;
  /** What the fair share charges: the prompt tokens, or the uncached ones (`uncachedCharge`). */
  charge: FlowCharge;
  /** The served model's prefill price, µs per uncached prompt token (`--prefill-us-per-token`). */
  prefillUsPerToken: number;
}

/**
 * Owner release's readiness over the pool's load now (`src/flow/ownerRelease.ts`), as the
 * simulator judges it (`src/sim/flowControl.ts`, `SimFlowControl.#ready`): what each replica
 * caches of a prompt is the router's view (`Router.prefixBlocks`: its index as `route` matches
 * it, a read that moves nothing), capped at the prompt's tokens. A sparse tenant's request, with
 * finish-first on, goes to the replica where its prefill ends first (each replica's queued
 * prefill plus its uncached tokens at the replica's price: its speed in a mixed fleet, else the
 * model's); otherwise, or when that replica is an owner without room, `ownerReady` decides. A
 * request whose prompt is not known is ready wherever there is room, charged its prompt.
 */
export function ownerReadiness(
  pool: Pick<ModelPool, 'router'>,
  view: PoolLoadView & { ids: number[]; names: string[] },
  limits: SaturationLimits,
  nowMs: number,
  options: OwnerPassOptions,
): FlowReadiness {
  const eligible = view.replicas.map((r) => r.eligible);
  const room = view.replicas.map((r) => hasGoodCapacity(r, limits));
  const anyRoom = room.some(Boolean);
  const besidesPrefill = { ...limits, maxQueuedPrefillMs: undefined };
  const finishFirst: FinishFirstReplica[] = view.replicas.map((r, i) => ({
    eligible: r.eligible,
    room: room[i]!,
    openBesidesPrefill: hasGoodCapacity(r, besidesPrefill),
    queuedPrefillMs: r.queuedPrefillMs ?? 0,
    prefillMsPerToken:
      pool.router.speedOf(view.names[i]!)?.prefillMsPerToken ?? options.prefillUsPerToken / 1000,
  }));
  return (req, waitedMs, sparse) => {
    if (req.prefix === undefined) return anyRoom ? { replica: null } : null;
    const { blockKeys, blockSize } = req.prefix;
    const blocks = pool.router.prefixBlocks(blockKeys, nowMs);
    const cached = view.ids.map((id) => Math.min((blocks[id] ?? 0) * blockSize, req.costTokens));
    const charged =
      options.charge === 'uncached'
        ? { chargeTokens: uncachedCharge(cached, room, req.costTokens) }
        : {};
    if (options.finishFirst && sparse) {
      const at = finishFirstReplica(cached, req.costTokens, finishFirst, options.slackTokens);
      if (at >= 0) return { replica: view.names[at]!, ...charged, preferred: true };
    }
    const verdict = ownerVerdict(cached, eligible, room, waitedMs, options);
    if (verdict === false) return null;
    return verdict === 'preferred'
      ? { replica: null, ...charged, preferred: true }
      : { replica: null, ...charged };
  };
}

/**
 * What a request let through is not routed to: with a replica finish-first chose, every other
 * one; else the replicas without room (`replicasWithoutRoom`).
 */
export function replicasToAvoid(
  view: PoolLoadView & { names: string[] },
  limits: SaturationLimits,
  onto: string | null,
): string[] {
  if (onto !== null && view.names.includes(onto)) return view.names.filter((n) => n !== onto);
  return replicasWithoutRoom(view, limits);
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
