/**
 * The flow-control flags of `kvroute serve` and `kvroute epp` (`src/serving/flowConfig.ts`):
 * `--flow-control` turns it on, the others tune it over the config file's `flow-control` key.
 */
import {
  DEFAULT_FLOW_SATURATION,
  defaultFlowControl,
  type FlowControlConfig,
} from '../serving/flowConfig.ts';
import { FLOW_RELEASES } from '../flow/index.ts';
import { type Flags, UsageError } from './args.ts';

export const FLOW_FLAG_NAMES =
  'flow-max-queued flow-max-queued-per-tenant flow-max-wait-ms flow-queue-depth flow-kv-usage flow-queued-prefill-ms ' +
  'flow-release flow-owner-slack-tokens flow-owner-hold-ms flow-look-ahead';
export const FLOW_BOOLEAN_FLAGS = 'flow-control';

const D = defaultFlowControl();
const S = DEFAULT_FLOW_SATURATION;
export const FLOW_HELP = `flow control (docs/flow-control.md): wait in the gateway while the pool is saturated
  --flow-control        while every eligible replica of a request's pool is saturated, the
                        request waits here (priority class: header x-kvroute-priority or its
                        tenant's priority-class; fair share by tokens between tenants)
  --flow-max-queued N   requests waiting in all; more: 429 with Retry-After (default ${D.maxQueued})
  --flow-max-queued-per-tenant N  requests of one tenant waiting; more: 429 (default ${D.maxQueuedPerTenant})
  --flow-max-wait-ms N  a request still waiting after N ms: 503 with Retry-After (default ${D.maxWaitMs})
  --flow-queue-depth N  a replica is saturated with more than N requests waiting in its
                        engine (default ${S.queueDepth}, llm-d's)
  --flow-kv-usage F     or with KV usage above F (default ${S.kvUsage}, llm-d's)
  --flow-queued-prefill-ms N  or with more than N ms of prefill the router queued there
                        (priced at --prefill-us-per-token; default ${S.queuedPrefillMs})
  --flow-release room|owner  when a waiting request leaves: room, whenever some replica has
                        room; owner, when the replicas with room cache its prompt within
                        --flow-owner-slack-tokens of the best replica (its cache owner has
                        room), or it has waited --flow-owner-hold-ms; others pass it meanwhile,
                        fair by tokens (default ${D.release})
  --flow-owner-slack-tokens N  owner release: cached prompt tokens a replica with room may
                        lack against the best one (default ${D.ownerSlackTokens})
  --flow-owner-hold-ms N  owner release: after this wait it goes wherever there is room
                        (default ${D.ownerHoldMs})
  --flow-look-ahead N   owner release: how deep into each tenant's queue a ready request is
                        looked for (default ${D.lookAhead})
`;

/** The flags over the config file's `flow-control`; tuning flags need it on. */
export function readFlowFlags(flags: Flags, current: FlowControlConfig): FlowControlConfig {
  const maxQueued = flags.positive('flow-max-queued', true);
  const perTenant = flags.positive('flow-max-queued-per-tenant', true);
  const maxWaitMs = flags.positive('flow-max-wait-ms');
  const queueDepth = flags.number('flow-queue-depth', { min: 0 });
  const kvUsage = flags.fraction('flow-kv-usage');
  const queuedPrefillMs = flags.number('flow-queued-prefill-ms', { min: 0 });
  const release = flags.oneOf('flow-release', FLOW_RELEASES);
  const ownerSlackTokens = flags.number('flow-owner-slack-tokens', { min: 0, integer: true });
  const ownerHoldMs = flags.number('flow-owner-hold-ms', { min: 0 });
  const lookAhead = flags.number('flow-look-ahead', { min: 1, integer: true });
  const enabled = flags.bool('flow-control') || current.enabled;
  const given = [
    maxQueued !== undefined && '--flow-max-queued',
    perTenant !== undefined && '--flow-max-queued-per-tenant',
    maxWaitMs !== undefined && '--flow-max-wait-ms',
    queueDepth !== undefined && '--flow-queue-depth',
    kvUsage !== undefined && '--flow-kv-usage',
    queuedPrefillMs !== undefined && '--flow-queued-prefill-ms',
    release !== undefined && '--flow-release',
    ownerSlackTokens !== undefined && '--flow-owner-slack-tokens',
    ownerHoldMs !== undefined && '--flow-owner-hold-ms',
    lookAhead !== undefined && '--flow-look-ahead',
  ].find(Boolean);
  if (given && !enabled) {
    throw new UsageError(`${given} needs --flow-control (or flow-control.enabled in the config)`);
  }
  const out: FlowControlConfig = {
    ...current,
    enabled,
    maxQueued: maxQueued ?? current.maxQueued,
    maxQueuedPerTenant: perTenant ?? current.maxQueuedPerTenant,
    maxWaitMs: maxWaitMs ?? current.maxWaitMs,
    saturation: {
      queueDepth: queueDepth ?? current.saturation.queueDepth,
      kvUsage: kvUsage ?? current.saturation.kvUsage,
      queuedPrefillMs: queuedPrefillMs ?? current.saturation.queuedPrefillMs,
    },
    release: release ?? current.release,
    ownerSlackTokens: ownerSlackTokens ?? current.ownerSlackTokens,
    ownerHoldMs: ownerHoldMs ?? current.ownerHoldMs,
    lookAhead: lookAhead ?? current.lookAhead,
  };
  if (out.maxQueuedPerTenant > out.maxQueued) {
    throw new UsageError(
      `--flow-max-queued-per-tenant (${out.maxQueuedPerTenant}) must not exceed --flow-max-queued (${out.maxQueued})`,
    );
  }
  return out;
}
