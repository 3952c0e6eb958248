/**
 * What the generate path reads (settings a config reload changes live are mutable), and P/D
 * routing's part of it.
 */
import type { ReplicaSpec } from '../model/cost.ts';
import type { PdMetrics } from './pd/metrics.ts';
import type { GatewayAdmission } from '../serving/admission.ts';
import type { Authenticator } from '../serving/auth.ts';
import type { FlowControl } from '../serving/flowControl.ts';
import type { Logger } from '../serving/log.ts';
import type { GatewayMetrics } from '../serving/metrics.ts';
import type { ModelPools } from '../serving/pools.ts';
import type { ReplicaLabels } from '../serving/replicaLabels.ts';
import type { GatewayPlanner } from '../serving/planner.ts';

export interface PdContext {
  thresholdTokens: number;
  metrics: PdMetrics;
  /** The replica the decode model assumes (default: the router seed's). */
  spec: ReplicaSpec;
  kvThreshold: number;
}

/** What the generate path reads; the settings that a config reload changes live are mutable. */
export interface GenerateContext {
  pools: ModelPools;
  auth: Authenticator;
  /** Tenant limits, priority classes and the fleet queue bound (429s). */
  admission: GatewayAdmission;
  /** `--flow-control`: requests wait while their pool is saturated; null: off. */
  flow: FlowControl | null;
  metrics: GatewayMetrics;
  logger: Logger;
  blockSize: number;
  bodyLimitBytes: number;
  maxRetries: number;
  firstByteTimeoutMs: number;
  /** The ledger's id: unique while in flight, whatever id the client sent. */
  nextLedgerId(): string;
  /** P/D routing for pools with prefill or decode backends (`pd/`). */
  pd?: PdContext;
  /** What the replica headers call a replica (a label, or its address when the operator says). */
  labels: ReplicaLabels;
  /** Session affinity's header (lower case); null: affinity off, no session key is read. */
  sessionHeader?: string | null;
  /** The online planner (`--planner`): told of every request served. */
  planner?: GatewayPlanner | null;
}
