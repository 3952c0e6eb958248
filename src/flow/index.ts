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
  DEFAULT_LOOK_AHEAD,
  DEFAULT_OWNER_HOLD_MS,
  DEFAULT_OWNER_SLACK_TOKENS,
  FLOW_RELEASES,
  type FlowRelease,
  type OwnerReleaseOptions,
  ownerReady,
} from './ownerRelease.ts';
