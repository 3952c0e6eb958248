/**
 * The policy contract. A policy reads a snapshot of the eligible replicas and returns a choice;
 * it changes nothing. The Router applies the choice to its ledger and index, then calls the
 * optional hooks, which is where a policy updates state of its own (a round-robin cursor, an
 * approximate tree). An absent hook is a no-op.
 */
import type { BlockKey } from '../kv/blockKey.ts';
import type { Rng } from '../util/rng.ts';
import { type LoraView, NO_LORA } from './adapters.ts';
import type { ReplicaSpeed } from './replicaSpeed.ts';

export interface RouteRequest {
  /** Unique while in flight; the key for onFirstToken / onFinished. */
  id: string;
  /** Keys of the prompt's full blocks, chained from the first (computeBlockKeys). */
  blockKeys: readonly BlockKey[];
  promptTokens: number;
  /** Tokens per block the keys were computed with. */
  blockSize: number;
  tenant?: string;
  customer?: string;
  /** Replica names this decision treats as down (a retry after one of them went silent). */
  avoid?: readonly string[];
  /**
   * The LoRA adapter the request runs with (the gateway parses it out of `model`); absent: the
   * base model. The block keys must have been computed with it (`KeyScope.loraName`).
   */
  lora?: string;
  /**
   * A conversation's routing key (session affinity, sessionMap.ts): its request stays on the
   * replica the key's last one went to while the cost rule allows. Absent: no affinity.
   */
  session?: string;
}

/** One eligible replica as a policy sees it: plain numbers, copied for this decision. */
export interface ReplicaView {
  /** Stable index of the replica in the router (bit position in the prefix index). */
  readonly id: number;
  readonly name: string;
  /** Longest prefix of this request cached here, in blocks (index plus overlay). */
  readonly cachedBlocks: number;
  /** cachedBlocks x blockSize, at most promptTokens. */
  readonly cachedTokens: number;
  /**
   * Of cachedTokens, those only the replica's CPU tier holds (a reload, not a GPU hit); 0 where
   * no CPU tier is indexed.
   */
  readonly cpuCachedTokens: number;
  /** Ledger: uncached prompt tokens assigned here whose first token has not come back. */
  readonly queuedPromptTokens: number;
  readonly prefillRequests: number;
  readonly decodeRequests: number;
  /** prefillRequests + decodeRequests. */
  readonly inFlight: number;
  readonly activePrefillBlocks: number;
  readonly activeDecodeBlocks: number;
  /** Last report: KV usage 0..1 (0 before any report). */
  readonly kvUsage: number;
  /** Last report: running and waiting requests (0 before any report). */
  readonly running: number;
  readonly waiting: number;
  /** Last report's queued prompt tokens, when the engine sends them. */
  readonly reportedQueuedPromptTokens: number | undefined;
  readonly reportedAtMs: number | undefined;
  /** Blocks the prefix index holds for this replica (its tree size). */
  readonly indexedBlocks: number;
  /** The request's adapter on this replica (NO_LORA when the request names none). */
  readonly lora: Readonly<LoraView>;
  /** The replica's speed in a mixed fleet (absent: the policy's fleet-wide figures). */
  readonly speed?: ReplicaSpeed;
}

/** A ReplicaView whose fields can be written: the router refills one per replica per route. */
export type MutableReplicaView = { -readonly [K in keyof ReplicaView]: ReplicaView[K] };

/** Replica `id`'s view with nothing routed, cached or reported, every field present. */
export function idleReplicaView(id: number, name: string): MutableReplicaView {
  return {
    id,
    name,
    cachedBlocks: 0,
    cachedTokens: 0,
    cpuCachedTokens: 0,
    queuedPromptTokens: 0,
    prefillRequests: 0,
    decodeRequests: 0,
    inFlight: 0,
    activePrefillBlocks: 0,
    activeDecodeBlocks: 0,
    kvUsage: 0,
    running: 0,
    waiting: 0,
    reportedQueuedPromptTokens: undefined,
    reportedAtMs: undefined,
    indexedBlocks: 0,
    lora: NO_LORA,
    speed: undefined,
  };
}

export interface PickInput {
  readonly request: RouteRequest;
  readonly nowMs: number;
  /**
   * Eligible replicas, in id order, never empty. The router refills these views for each route:
   * read them during `pick`, keep nothing of them.
   */
  readonly candidates: readonly ReplicaView[];
  /** Names of all replicas by id (removed ones: null), for rings that must not move. */
  readonly fleet: readonly (string | null)[];
  /** Bumped whenever `fleet` changes. */
  readonly fleetVersion: number;
  /** The router's seeded stream: the only source of randomness. */
  readonly rng: Rng;
}

export interface Pick {
  /** Id of the chosen replica; must be one of the candidates. */
  readonly replicaId: number;
  /**
   * Per-candidate scores (aligned with `candidates`), for metrics and debugging; valid until the
   * policy's next pick (a policy may reuse the array).
   */
  readonly scores?: readonly number[];
}

export interface Routed {
  readonly request: RouteRequest;
  readonly replicaId: number;
  readonly cachedTokens: number;
  readonly nowMs: number;
}

export interface Policy {
  /** Registry name; also the metric label. */
  readonly name: string;
  /**
   * For a request with an adapter, the router offers only replicas with a free adapter slot
   * (hasLoraSlot) while any has one. Absent or false: every eligible replica, LoRA-blind.
   */
  readonly loraAware?: boolean;
  /**
   * The policy reproduces another project's router and carries only that project's filters:
   * the router's own guards (KV usage over kvThreshold, a stale report) do not apply to it, and
   * only a down replica is skipped, as every project drops endpoints that fail their health
   * checks. Absent or false: kvroute's guards run before the policy (filters.ts).
   */
  readonly ownFilters?: boolean;
  pick(input: PickInput): Pick;
  onRouted?(routed: Routed): void;
  onFirstToken?(requestId: string, replicaId: number, nowMs: number): void;
  onFinished?(requestId: string, replicaId: number, nowMs: number): void;
  onReplicaRemoved?(replicaId: number): void;
}
