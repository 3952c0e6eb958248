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
export * from './ownerRelease.ts';
export type { ReadyVerdict } from './flowQueue.ts';
