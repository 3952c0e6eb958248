/** Public surface of the router core. */
export {
  hasLoraSlot,
  type LoraView,
  NO_LORA,
  parseLoraRequestsInfo,
  type ReplicaLoraReport,
} from './adapters.ts';
export { ApproxIndex, DEFAULT_APPROX_CAPACITY_BLOCKS } from './index/approxIndex.ts';
export { BlockIndex } from './index/blockIndex.ts';
export { RouterError, type RouterErrorCode } from './errors.ts';
export { EventIndex } from './index/eventIndex.ts';
export {
  DEFAULT_KV_THRESHOLD,
  DEFAULT_LORA_LOAD_TOKENS,
  DEFAULT_OVERLAY_TTL_MS,
  DEFAULT_POLICY,
  DEFAULT_SEED,
  DEFAULT_STALE_MS,
  INDEX_MODES,
  type IndexMode,
  QUEUE_SOURCES,
  type QueueSource,
} from './defaults.ts';
export { judge, type Verdict } from './filters.ts';
export {
  type EngineHash,
  type ForeignBlockRemoved,
  type ForeignBlockStored,
  ForeignKeyMap,
  type ForeignKvEvent,
} from './index/foreignKeys.ts';
export { Ledger, type ReplicaLoad } from './ledger.ts';
export { RouteOverlay } from './index/overlay.ts';
export type { Pick, PickInput, Policy, ReplicaView, Routed, RouteRequest } from './policy.ts';
export { idleReplicaView } from './policy.ts';
export { decodeStepMsOf, type ReplicaSpeed } from './replicaSpeed.ts';
export { DEFAULT_SLOT_SIMILARITY, SlotCache, type SlotCacheOptions } from './index/slotCache.ts';
export type { PrefixIndex } from './index/prefixIndex.ts';
export { makePrefixIndex } from './index/makePrefixIndex.ts';
export { matchPrefix, replicaMask } from './index/prefixMatch.ts';
export {
  isPolicyName,
  makePolicy,
  POLICY_NAMES,
  type PolicyName,
  type PolicyOptions,
} from './registry.ts';
export { DEFAULT_SESSION_CAPACITY, SessionMap, type SessionMapOptions } from './sessionMap.ts';
export {
  type AffinityOutcome,
  type ApproxTiers,
  type InFlightRecord,
  type PeerRoute,
  type ReplicaReport,
  type RouteDecision,
  Router,
  type RouterOptions,
  type SessionAffinityOptions,
} from './router.ts';
export type { ReplicaSnapshot, RouterCounters, RouterSnapshot } from './snapshot.ts';
