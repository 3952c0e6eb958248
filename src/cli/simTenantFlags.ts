/**
 * `kvroute sim`'s tenant and flow-control flags: `--tenants heavy:0.8,light:0.2` (name : share of
 * arrivals, optionally `:w=WEIGHT` and `:class=NAME`), `--flow-control on|off` and the queue's
 * bounds (`src/sim/flowControl.ts`, `src/flow/`).
 */
import { DEFAULT_SATURATION_LIMITS } from '../flow/saturation.ts';
import {
  DEFAULT_FLOW_CLASS,
  DEFAULT_FLOW_RELEASE,
  DEFAULT_FLOW_LOOK_AHEAD,
  DEFAULT_FLOW_OWNER_HOLD_MS,
  DEFAULT_FLOW_OWNER_SLACK_TOKENS,
  DEFAULT_FLOW_MAX_QUEUED,
  DEFAULT_FLOW_MAX_QUEUED_PER_TENANT,
  DEFAULT_FLOW_MAX_WAIT_MS,
  DEFAULT_FLOW_SATURATION_QUEUE_MS,
  DEFAULT_FLOW_SATURATION_WAITING,
  FLOW_CLASSES,
  FLOW_RELEASES,
  type FlowClassName,
  type SimFlowControl,
  type TenantSpec,
} from '../sim/flowControl.ts';
import { type Flags, flagSpec, UsageError } from './args.ts';

export const SIM_TENANT_FLAGS = flagSpec({
  string:
    'tenants flow-control flow-max-queued flow-max-queued-per-tenant flow-max-wait-ms ' +
    'flow-saturation-queue-ms flow-saturation-waiting flow-release flow-owner-hold-ms ' +
    'flow-owner-slack-tokens flow-look-ahead',
});

const CLASS_NAMES = FLOW_CLASSES.map((c) => c.name);
const ON_OFF = ['on', 'off'] as const;

export const SIM_TENANT_HELP = `tenants and flow control
  --tenants LIST        NAME:SHARE[:w=WEIGHT][:class=CLASS],... each arrival's tenant, drawn by
                        share (same seed, same tenant per request); CLASS ${CLASS_NAMES.join('|')}
                        (default ${DEFAULT_FLOW_CLASS}); prints per tenant served, 429, 503, TTFT
                        (from arrival) and queue wait
  --flow-control on|off while every replica is saturated (llm-d's rule: more waiting requests
                        than --flow-saturation-waiting, KV usage over ${DEFAULT_SATURATION_LIMITS.maxKvUsage}, or more
                        queued prefill than --flow-saturation-queue-ms), arrivals wait in a
                        queue: strict priority between classes, fair share by tokens between
                        tenants; each one let through is routed among the replicas with room
                        (default off)
  --flow-max-queued N   queued arrivals at most; more are refused, 429 (default ${DEFAULT_FLOW_MAX_QUEUED})
  --flow-max-queued-per-tenant N  the same per tenant (default ${DEFAULT_FLOW_MAX_QUEUED_PER_TENANT})
  --flow-max-wait-ms MS a queued arrival waiting this long ends as 503 (default ${DEFAULT_FLOW_MAX_WAIT_MS})
  --flow-saturation-queue-ms MS  a replica with more modelled prefill queued has no room
                        (default ${DEFAULT_FLOW_SATURATION_QUEUE_MS})
  --flow-saturation-waiting N  a replica with more requests waiting has no room (default
                        ${DEFAULT_FLOW_SATURATION_WAITING}; llm-d's is ${DEFAULT_SATURATION_LIMITS.maxWaitingRequests})
  --flow-release room|owner  when a queued arrival leaves: room, whenever some replica has
                        room; owner, when the replicas with room cache its prompt within
                        --flow-owner-slack-tokens of the best replica (its cache owner has
                        room), or it has waited --flow-owner-hold-ms; others pass it meanwhile,
                        fair by tokens (default ${DEFAULT_FLOW_RELEASE})
  --flow-owner-hold-ms MS  owner release: after this wait it goes wherever there is room
                        (default ${DEFAULT_FLOW_OWNER_HOLD_MS})
  --flow-owner-slack-tokens N  owner release: cached prompt tokens a replica with room may
                        lack against the best one (default ${DEFAULT_FLOW_OWNER_SLACK_TOKENS})
  --flow-look-ahead N   owner release: how deep into each tenant's queue a ready arrival is
                        looked for (default ${DEFAULT_FLOW_LOOK_AHEAD})
`;

/** `--tenants`: the list, or undefined when not given. */
export function parseTenants(spec: string): TenantSpec[] {
  const tenants = spec.split(',').map((part) => {
    const [name, share, ...options] = part.trim().split(':');
    if (!name || share === undefined) {
      throw new UsageError(
        `--tenants takes NAME:SHARE[:w=WEIGHT][:class=CLASS],...; got '${part}'`,
      );
    }
    const shareValue = Number(share);
    if (!(Number.isFinite(shareValue) && shareValue > 0)) {
      throw new UsageError(`--tenants: the share of ${name} must be a number > 0, got '${share}'`);
    }
    const tenant: TenantSpec = {
      name,
      share: shareValue,
      weight: 1,
      priorityClass: DEFAULT_FLOW_CLASS,
    };
    for (const option of options) {
      const [key, value = ''] = option.split('=');
      if (key === 'w') {
        const weight = Number(value);
        if (!(Number.isFinite(weight) && weight > 0)) {
          throw new UsageError(`--tenants: w= of ${name} must be a number > 0, got '${value}'`);
        }
        tenant.weight = weight;
      } else if (key === 'class') {
        if (!(CLASS_NAMES as string[]).includes(value)) {
          throw new UsageError(
            `--tenants: class= of ${name} must be one of ${CLASS_NAMES.join(', ')}; got '${value}'`,
          );
        }
        tenant.priorityClass = value as FlowClassName;
      } else {
        throw new UsageError(`--tenants: options are w=WEIGHT and class=CLASS; got '${option}'`);
      }
    }
    return tenant;
  });
  const names = new Set(tenants.map((t) => t.name));
  if (names.size !== tenants.length) throw new UsageError('--tenants: a tenant is named twice');
  return tenants;
}

export interface TenantFlags {
  tenants?: TenantSpec[];
  flowControl?: SimFlowControl;
}

/** `unsupported`: flags of runs that do not take tenants (a P/D fleet, the fault audit). */
export function readTenantFlags(flags: Flags, unsupported: readonly string[] = []): TenantFlags {
  const spec = flags.string('tenants');
  const on = (flags.oneOf('flow-control', ON_OFF) ?? 'off') === 'on';
  if (spec !== undefined || on) {
    const other = unsupported.find((f) => flags.has(f));
    if (other !== undefined) {
      throw new UsageError(`--tenants and --flow-control run an aggregated fleet; drop --${other}`);
    }
  }
  const bounds = [
    'flow-max-queued',
    'flow-max-queued-per-tenant',
    'flow-max-wait-ms',
    'flow-saturation-queue-ms',
    'flow-saturation-waiting',
    'flow-release',
    'flow-owner-hold-ms',
    'flow-owner-slack-tokens',
    'flow-look-ahead',
  ];
  if (!on) {
    const stray = bounds.find((b) => flags.has(b));
    if (stray !== undefined) throw new UsageError(`--${stray} needs --flow-control on`);
  }
  const out: TenantFlags = {};
  if (spec !== undefined) out.tenants = parseTenants(spec);
  if (on) {
    out.flowControl = {
      maxQueued:
        flags.number('flow-max-queued', { min: 0, integer: true }) ?? DEFAULT_FLOW_MAX_QUEUED,
      maxQueuedPerTenant:
        flags.number('flow-max-queued-per-tenant', { min: 0, integer: true }) ??
        DEFAULT_FLOW_MAX_QUEUED_PER_TENANT,
      maxWaitMs: flags.positive('flow-max-wait-ms') ?? DEFAULT_FLOW_MAX_WAIT_MS,
      saturation: {
        ...DEFAULT_SATURATION_LIMITS,
        maxWaitingRequests:
          flags.number('flow-saturation-waiting', { min: 0, integer: true }) ??
          DEFAULT_FLOW_SATURATION_WAITING,
        maxQueuedPrefillMs:
          flags.number('flow-saturation-queue-ms', { min: 0 }) ?? DEFAULT_FLOW_SATURATION_QUEUE_MS,
      },
      release: flags.oneOf('flow-release', FLOW_RELEASES) ?? DEFAULT_FLOW_RELEASE,
      ownerHoldMs: flags.number('flow-owner-hold-ms', { min: 0 }) ?? DEFAULT_FLOW_OWNER_HOLD_MS,
      ownerSlackTokens:
        flags.number('flow-owner-slack-tokens', { min: 0, integer: true }) ??
        DEFAULT_FLOW_OWNER_SLACK_TOKENS,
      lookAhead:
        flags.number('flow-look-ahead', { min: 1, integer: true }) ?? DEFAULT_FLOW_LOOK_AHEAD,
    };
  }
  return out;
}
