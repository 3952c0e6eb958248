/**
 * The flow-control part of `kvroute serve`'s and `kvroute epp`'s config: whether requests wait in
 * the front end while every replica of their pool is saturated, the queue's bounds and deadline,
 * and what saturated means. Read from the same YAML document as the rest of the config:
 *
 *   flow-control:
 *     enabled: true
 *     max-queued: 1000              # requests waiting in all (more: 429)
 *     max-queued-per-tenant: 200    # requests of one tenant waiting (more: 429)
 *     max-wait-ms: 30000            # a request still waiting then: 503
 *     release: room                 # room | owner: when a waiting request may leave
 *     owner-slack-tokens: 1024      # owner: cached tokens a replica with room may lack
 *     owner-hold-ms: 400            # owner: after this wait, any replica with room
 *     look-ahead: 16                # owner: how deep into each tenant's queue
 *     owner-pass-ms: 2000           # owner: a warm one passes its tenant's cold ones this young
 *     finish-first: true            # owner: a sparse tenant's request goes where it ends first
 *     charge: uncached              # owner: prompt | uncached, what the fair share charges
 *     saturation:                   # a replica is saturated past any one of these
 *       queue-depth: 5              # requests waiting in its engine (llm-d's default)
 *       kv-usage: 0.8               # KV cache usage fraction (llm-d's default)
 *       queued-prefill-ms: 2000     # modelled prefill the router has queued there
 *   tenants:
 *     acme: { flow-weight: 2 }      # its share of tokens inside its class (default 1)
 *
 * The classes are `priority-classes` (vLLM's priority: lower goes first), a request's class its
 * `x-kvroute-priority` header or its tenant's `priority-class`, else `default`.
 */
import {
  FLOW_CHARGES,
  FLOW_RELEASES,
  type FlowCharge,
  type FlowRelease,
  OWNER_RELEASE_DEFAULTS as OWNER,
} from '../flow/index.ts';
import { configError, isRecord, num, int } from './configValues.ts';

export interface FlowSaturationConfig {
  /** Requests waiting in a replica's engine (its reported queue). */
  queueDepth: number;
  /** KV cache usage fraction of a replica. */
  kvUsage: number;
  /** Modelled prefill queued on a replica by the router's ledger, ms. */
  queuedPrefillMs: number;
}

export interface FlowControlConfig {
  enabled: boolean;
  maxQueued: number;
  maxQueuedPerTenant: number;
  maxWaitMs: number;
  saturation: FlowSaturationConfig;
  /**
   * When a waiting request may leave: `room`, whenever the pool has room; `owner`, when the
   * replicas with room cache its prompt within `ownerSlackTokens` of the best replica (its
   * cache owner has room) or it has waited `ownerHoldMs` since it arrived, others passing it
   * meanwhile, at most `lookAhead` deep into each tenant's queue (`src/flow/ownerRelease.ts`).
   */
  release: FlowRelease;
  ownerSlackTokens: number;
  ownerHoldMs: number;
  lookAhead: number;
  /**
   * Owner release: inside a tenant, a request that goes warm passes earlier ones that would go
   * cold (ready by their hold only) while they have waited less than this; 0: never
   * (`mayPassWithin`).
   */
  ownerPassMs: number;
  /**
   * Owner release: a request whose tenant has nothing else queued goes at once to the replica
   * where its prefill ends first (`finishFirstReplica`), rather than wait for its owner.
   */
  finishFirst: boolean;
  /**
   * Owner release: what a dispatched request costs its tenant in the fair share, its prompt
   * tokens or the ones the warmest replica with room does not cache (`uncachedCharge`).
   */
  charge: FlowCharge;
  /** Tenant -> its weight inside its class (only tenants listed with `flow-weight`). */
  tenantWeights: Record<string, number>;
}

/**
 * llm-d's utilization detector defaults (llm-d-inference-scheduler
 * `pkg/epp/framework/plugins/flowcontrol/saturationdetector/utilization/config.go`:
 * `DefaultQueueDepthThreshold` 5, `DefaultKVCacheUtilThreshold` 0.8); the queued prefill is
 * kvroute's own signal (the router's ledger, current between scrapes).
 */
export const DEFAULT_FLOW_SATURATION: FlowSaturationConfig = {
  queueDepth: 5,
  kvUsage: 0.8,
  queuedPrefillMs: 2_000,
};

export function defaultFlowControl(): FlowControlConfig {
  return {
    enabled: false,
    maxQueued: 1_000,
    maxQueuedPerTenant: 200,
    maxWaitMs: 30_000,
    saturation: { ...DEFAULT_FLOW_SATURATION },
    release: 'room',
    ownerSlackTokens: OWNER.ownerSlackTokens,
    ownerHoldMs: OWNER.ownerHoldMs,
    lookAhead: OWNER.lookAhead,
    ownerPassMs: OWNER.ownerPassMs,
    finishFirst: OWNER.sparseFinishFirst,
    charge: OWNER.charge,
    tenantWeights: {},
  };
}

const FLOW_KEYS = [
  'enabled',
  'max-queued',
  'max-queued-per-tenant',
  'max-wait-ms',
  'release',
  'owner-slack-tokens',
  'owner-hold-ms',
  'look-ahead',
  'owner-pass-ms',
  'finish-first',
  'charge',
  'saturation',
];
const SATURATION_KEYS = ['queue-depth', 'kv-usage', 'queued-prefill-ms'];

/** The `flow-control` key and the tenants' `flow-weight` of a config document, onto `base`. */
export function readFlowDoc(
  doc: Record<string, unknown>,
  base: FlowControlConfig,
): FlowControlConfig {
  const out: FlowControlConfig = {
    ...base,
    saturation: { ...base.saturation },
    tenantWeights: { ...base.tenantWeights },
  };
  if (doc['flow-control'] !== undefined) {
    const flow = mappingOf(doc['flow-control'], 'flow-control', FLOW_KEYS);
    readFlowKeys(flow, out);
    if (flow.saturation !== undefined) readSaturation(flow.saturation, out.saturation);
  }
  if (isRecord(doc.tenants)) out.tenantWeights = flowWeightsOf(doc.tenants);
  if (out.maxQueuedPerTenant > out.maxQueued) {
    throw configError(
      'flow-control.max-queued-per-tenant',
      `must not exceed max-queued (${out.maxQueued})`,
    );
  }
  return out;
}

/** `v` as a mapping holding none but `keys`, else the config error naming `key`. */
function mappingOf(v: unknown, key: string, keys: readonly string[]): Record<string, unknown> {
  if (!isRecord(v)) throw configError(key, `must be a mapping (${keys.join(', ')})`);
  for (const k of Object.keys(v)) {
    if (!keys.includes(k)) {
      throw configError(`${key}.${k}`, `is not a known key (${keys.join(', ')})`);
    }
  }
  return v;
}

/** The `flow-control` mapping's own keys (all but `saturation`), onto `out`. */
function readFlowKeys(flow: Record<string, unknown>, out: FlowControlConfig): void {
  if (flow.enabled !== undefined) out.enabled = bool(flow.enabled, 'flow-control.enabled');
  if (flow['max-queued'] !== undefined) {
    out.maxQueued = int(flow['max-queued'], 'flow-control.max-queued', 1);
  }
  if (flow['max-queued-per-tenant'] !== undefined) {
    out.maxQueuedPerTenant = int(
      flow['max-queued-per-tenant'],
      'flow-control.max-queued-per-tenant',
      1,
    );
  }
  if (flow['max-wait-ms'] !== undefined) {
    out.maxWaitMs = num(flow['max-wait-ms'], 'flow-control.max-wait-ms', 1);
  }
  if (flow.release !== undefined) {
    out.release = oneOf(flow.release, 'flow-control.release', FLOW_RELEASES);
  }
  if (flow['owner-slack-tokens'] !== undefined) {
    out.ownerSlackTokens = int(flow['owner-slack-tokens'], 'flow-control.owner-slack-tokens', 0);
  }
  if (flow['owner-hold-ms'] !== undefined) {
    out.ownerHoldMs = num(flow['owner-hold-ms'], 'flow-control.owner-hold-ms', 0);
  }
  if (flow['look-ahead'] !== undefined) {
    out.lookAhead = int(flow['look-ahead'], 'flow-control.look-ahead', 1);
  }
  if (flow['owner-pass-ms'] !== undefined) {
    out.ownerPassMs = num(flow['owner-pass-ms'], 'flow-control.owner-pass-ms', 0);
  }
  if (flow['finish-first'] !== undefined) {
    out.finishFirst = bool(flow['finish-first'], 'flow-control.finish-first');
  }
  if (flow.charge !== undefined)
    out.charge = oneOf(flow.charge, 'flow-control.charge', FLOW_CHARGES);
}

function bool(v: unknown, key: string): boolean {
  if (typeof v !== 'boolean') throw configError(key, 'must be true or false');
  return v;
}

function oneOf<T extends string>(v: unknown, key: string, values: readonly T[]): T {
  if (!(values as readonly unknown[]).includes(v)) {
    throw configError(key, `must be one of ${values.join(', ')}`);
  }
  return v as T;
}

/** `flow-control.saturation`, onto `out`. */
function readSaturation(v: unknown, out: FlowSaturationConfig): void {
  const key = 'flow-control.saturation';
  const sat = mappingOf(v, key, SATURATION_KEYS);
  if (sat['queue-depth'] !== undefined) {
    out.queueDepth = num(sat['queue-depth'], `${key}.queue-depth`, 0);
  }
  if (sat['kv-usage'] !== undefined) {
    out.kvUsage = num(sat['kv-usage'], `${key}.kv-usage`, Number.MIN_VALUE, 1);
  }
  if (sat['queued-prefill-ms'] !== undefined) {
    out.queuedPrefillMs = num(sat['queued-prefill-ms'], `${key}.queued-prefill-ms`, 0);
  }
}

/** Each tenant's `flow-weight`, of the tenants that give one. */
function flowWeightsOf(tenants: Record<string, unknown>): Record<string, number> {
  const weights: Record<string, number> = {};
  for (const [tenant, spec] of Object.entries(tenants)) {
    if (!isRecord(spec) || spec['flow-weight'] === undefined) continue;
    weights[tenant] = num(spec['flow-weight'], `tenants.${tenant}.flow-weight`, 1e-6);
  }
  return weights;
}
