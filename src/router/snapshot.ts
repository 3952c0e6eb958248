/** JSON shapes the router exposes: `/router/replicas` and metric counters. */
import type { Verdict } from './filters.ts';
import type { ReplicaLoad } from './ledger.ts';
import type { IndexMode } from './defaults.ts';

export interface ReplicaSnapshot extends ReplicaLoad {
  name: string;
  id: number;
  healthy: boolean;
  /** Guard verdict at the snapshot's nowMs, null when none was given. */
  verdict: Verdict | null;
  inFlight: number;
  kvUsage: number | null;
  running: number | null;
  waiting: number | null;
  reportedQueuedPromptTokens: number | null;
  reportedAtMs: number | null;
  reportAgeMs: number | null;
  lastEventAtMs: number | null;
  indexedBlocks: number;
  /** Indexed blocks per tier: GPU (= indexedBlocks) and the CPU tier (medium "CPU" events). */
  indexedBlocksByMedium: { GPU: number; CPU: number };
  /** LoRA adapters running or waiting there (reported, or routed and unfinished). */
  loraAdapters: string[];
  /** The engine's max_loras from its last report, null before one said. */
  maxLoras: number | null;
}

export interface RouterCounters {
  /** Metric label. */
  policy: string;
  decisions: number;
  /** Prompt tokens routed to a replica that had them cached / did not. */
  cachedTokens: number;
  uncachedTokens: number;
  spills: number;
  failOpens: number;
  /** Routes refused with ERR_NO_HEALTHY_REPLICA. */
  noHealthyReplica: number;
  eventBatches: number;
  /** Index entries added or removed by events. */
  blocksChanged: number;
}

export interface RouterSnapshot {
  policy: string;
  indexMode: IndexMode;
  indexedKeys: number;
  /** Route predictions whose blocks the overlay still tracks. */
  overlayPredictions: number;
  inFlightRequests: number;
  replicas: ReplicaSnapshot[];
  counters: RouterCounters;
}
