/**
 * `kvroute sim`'s tenant and flow-control flags: `--tenants heavy:0.8,light:0.2` (name : share of
 * arrivals, optionally `:w=WEIGHT` and `:class=NAME`), `--flow-control on|off` and the queue's
 * bounds (`src/sim/flowControl.ts`, `src/flow/`).
 */
import { DEFAULT_SATURATION_LIMITS } from '../flow/saturation.ts';
import { DEFAULT_FLOW_OWNER_PASS_MS } from '../sim/flowControl.ts';
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
import { type Flags, UsageError } from './args.ts';
import { readerOf } from './options/read.ts';
import { int, num, oneOf, options, str } from './options/table.ts';

const CLASS_NAMES = FLOW_CLASSES.map((c) => c.name);
const ON_OFF = ['on', 'off'] as const;

const TENANTS_HELP =
  "NAME:SHARE[:w=WEIGHT][:class=CLASS],... each arrival's tenant, drawn by share (same seed, " +
  `same tenant per request); CLASS ${CLASS_NAMES.join('|')} (default ${DEFAULT_FLOW_CLASS}); ` +
  'prints per tenant served, 429, 503, TTFT (from arrival) and queue wait';
const FLOW_CONTROL_HELP =
  "while every replica is saturated (llm-d's rule: more waiting requests than " +
  `--flow-saturation-waiting, KV usage over ${DEFAULT_SATURATION_LIMITS.maxKvUsage}, or more ` +
  'queued prefill than --flow-saturation-queue-ms), arrivals wait in a queue: strict priority ' +
  'between classes, fair share by tokens between tenants; each one let through is routed among ' +
  'the replicas with room';
const RELEASE_HELP =
  'when a queued arrival leaves: room, whenever some replica has room; owner, when the replicas ' +
  'with room cache its prompt within --flow-owner-slack-tokens of the best replica (its cache ' +
  'owner has room), or it has waited --flow-owner-hold-ms; others pass it meanwhile, fair by tokens';

/** The tenant and flow-control options, one row each (sim's flag spec, `--help` and docs). */
// biome-ignore format: one option a line
export const SIM_TENANT_OPTIONS = options({
  tenants: str('LIST', TENANTS_HELP, { section: 'tenants and flow control', docs: ' ([flow-control.md](flow-control.md))' }),
  'flow-control': oneOf(ON_OFF, 'on|off', FLOW_CONTROL_HELP, { default: 'off' }),
  'flow-max-queued': int('N', 'queued arrivals at most; more are refused, 429', { min: 0, default: DEFAULT_FLOW_MAX_QUEUED }),
  'flow-max-queued-per-tenant': int('N', 'the same per tenant', { min: 0, default: DEFAULT_FLOW_MAX_QUEUED_PER_TENANT }),
  'flow-max-wait-ms': num('MS', 'a queued arrival waiting this long ends as 503', { above: 0, default: DEFAULT_FLOW_MAX_WAIT_MS }),
  'flow-saturation-queue-ms': num('MS', 'a replica with more modelled prefill queued has no room', { min: 0, default: DEFAULT_FLOW_SATURATION_QUEUE_MS }),
  'flow-saturation-waiting': int('N', `a replica with more requests waiting has no room (default {default}; llm-d's is ${DEFAULT_SATURATION_LIMITS.maxWaitingRequests})`, { min: 0, default: DEFAULT_FLOW_SATURATION_WAITING }),
  'flow-release': oneOf(FLOW_RELEASES, 'room|owner', RELEASE_HELP, { default: DEFAULT_FLOW_RELEASE }),
  'flow-owner-hold-ms': num('MS', 'owner release: after this wait it goes wherever there is room', { min: 0, default: DEFAULT_FLOW_OWNER_HOLD_MS }),
  'flow-owner-slack-tokens': int('N', 'owner release: cached prompt tokens a replica with room may lack against the best one', { min: 0, default: DEFAULT_FLOW_OWNER_SLACK_TOKENS }),
  'flow-look-ahead': int('N', "owner release: how deep into each tenant's queue a ready arrival is looked for", { min: 1, default: DEFAULT_FLOW_LOOK_AHEAD }),
  'flow-owner-pass-ms': num('MS', "owner release: inside a tenant, an arrival whose cache owner has room passes earlier ones that would go cold (past their hold) while those have waited under MS; 0: never", { min: 0, default: DEFAULT_FLOW_OWNER_PASS_MS }),
});

/** The flow-control bounds: each needs `--flow-control on`. */
const BOUNDS = Object.keys(SIM_TENANT_OPTIONS).filter(
  (n) => n !== 'tenants' && n !== 'flow-control',
);

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
  const option = readerOf(SIM_TENANT_OPTIONS, flags);
  const spec = option('tenants');
  const on = (option('flow-control') ?? 'off') === 'on';
  if (spec !== undefined || on) {
    const other = unsupported.find((f) => flags.has(f));
    if (other !== undefined) {
      throw new UsageError(`--tenants and --flow-control run an aggregated fleet; drop --${other}`);
    }
  }
  if (!on) {
    const stray = BOUNDS.find((b) => flags.has(b));
    if (stray !== undefined) throw new UsageError(`--${stray} needs --flow-control on`);
  }
  const out: TenantFlags = {};
  if (spec !== undefined) out.tenants = parseTenants(spec);
  if (on) {
    out.flowControl = {
      maxQueued: option('flow-max-queued') ?? DEFAULT_FLOW_MAX_QUEUED,
      maxQueuedPerTenant:
        option('flow-max-queued-per-tenant') ?? DEFAULT_FLOW_MAX_QUEUED_PER_TENANT,
      maxWaitMs: option('flow-max-wait-ms') ?? DEFAULT_FLOW_MAX_WAIT_MS,
      saturation: {
        ...DEFAULT_SATURATION_LIMITS,
        maxWaitingRequests: option('flow-saturation-waiting') ?? DEFAULT_FLOW_SATURATION_WAITING,
        maxQueuedPrefillMs: option('flow-saturation-queue-ms') ?? DEFAULT_FLOW_SATURATION_QUEUE_MS,
      },
      release: option('flow-release') ?? DEFAULT_FLOW_RELEASE,
      ownerHoldMs: option('flow-owner-hold-ms') ?? DEFAULT_FLOW_OWNER_HOLD_MS,
      ownerSlackTokens: option('flow-owner-slack-tokens') ?? DEFAULT_FLOW_OWNER_SLACK_TOKENS,
      lookAhead: option('flow-look-ahead') ?? DEFAULT_FLOW_LOOK_AHEAD,
      ownerPassMs: option('flow-owner-pass-ms') ?? DEFAULT_FLOW_OWNER_PASS_MS,
    };
  }
  return out;
}
