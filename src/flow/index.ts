export {
  type EnqueueResult,
  type FlowClass,
  type FlowClassStats,
  type FlowItem,
  FlowQueue,
  type FlowQueueOptions,
  type FlowQueueStats,
  type FlowTenantStats,
} from './flowQueue.ts';
export {
  DEFAULT_SATURATION_LIMITS,
  hasGoodCapacity,
  isPoolSaturated,
  type PoolLoadView,
  type ReplicaLoad,
  type SaturationLimits,
} from './saturation.ts';
export {
  DEFAULT_FLOW_CHARGE,
  DEFAULT_LOOK_AHEAD,
  DEFAULT_OWNER_HOLD_MS,
  DEFAULT_OWNER_SLACK_TOKENS,
  DEFAULT_SPARSE_FINISH_FIRST,
  FLOW_CHARGES,
  FLOW_RELEASES,
  type FinishFirstReplica,
  type FlowCharge,
  type FlowRelease,
  finishFirstReplica,
  type OwnerReleaseOptions,
  ownerReady,
  uncachedCharge,
} from './ownerRelease.ts';
export type { ReadyVerdict } from './flowQueue.ts';
export { DEFAULT_OWNER_PASS_MS, mayPassWithin, ownerVerdict } from './ownerRelease.ts';
