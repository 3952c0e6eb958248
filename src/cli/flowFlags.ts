/**
 * The flow-control options of `kvroute serve` and `kvroute epp` (`src/serving/flowConfig.ts`),
 * one row each, shared by both tables: `--flow-control` turns it on, the others tune it over the
 * config file's `flow-control` key.
 */
import {
  DEFAULT_FLOW_SATURATION,
  defaultFlowControl,
  type FlowControlConfig,
} from '../serving/flowConfig.ts';
import { FLOW_CHARGES, FLOW_RELEASES } from '../flow/index.ts';
import { type Flags, UsageError } from './args.ts';
import { readerOf } from './options/read.ts';
import { bool, int, num, oneOf, options } from './options/table.ts';

const D = defaultFlowControl();
const S = DEFAULT_FLOW_SATURATION;

const RELEASE_HELP =
  'when a waiting request leaves: room, whenever some replica has room; owner, when the ' +
  'replicas with room cache its prompt within --flow-owner-slack-tokens of the best replica ' +
  '(its cache owner has room), or it has waited --flow-owner-hold-ms; others pass it meanwhile, ' +
  'fair by tokens';

/** The heading `--help` lists them under. */
export const FLOW_SECTION =
  'flow control (docs/flow-control.md): wait in the gateway while the pool is saturated';

// biome-ignore format: one option a line
export const FLOW_OPTIONS = options({
  'flow-control': bool("while every eligible replica of a request's pool is saturated, the request waits here (priority class: header x-kvroute-priority or its tenant's priority-class; fair share by tokens between tenants)", { section: FLOW_SECTION, docs: ' ([flow-control.md](flow-control.md#in-the-gateway))' }),
  'flow-max-queued': int('N', 'requests waiting in all; more: 429 with Retry-After', { above: 0, default: D.maxQueued }),
  'flow-max-queued-per-tenant': int('N', 'requests of one tenant waiting; more: 429', { above: 0, default: D.maxQueuedPerTenant }),
  'flow-max-wait-ms': num('N', 'a request still waiting after N ms: 503 with Retry-After', { above: 0, default: D.maxWaitMs }),
  'flow-queue-depth': num('N', "a replica is saturated with more than N requests waiting in its engine (default {default}, llm-d's)", { min: 0, default: S.queueDepth }),
  'flow-kv-usage': num('F', "or with KV usage above F (default {default}, llm-d's)", { above: 0, max: 1, default: S.kvUsage }),
  'flow-queued-prefill-ms': num('N', 'or with more than N ms of prefill the router queued there (priced at --prefill-us-per-token; default {default})', { min: 0, default: S.queuedPrefillMs }),
  'flow-release': oneOf(FLOW_RELEASES, 'room|owner', RELEASE_HELP, { default: D.release }),
  'flow-owner-slack-tokens': int('N', 'owner release: cached prompt tokens a replica with room may lack against the best one', { min: 0, default: D.ownerSlackTokens }),
  'flow-owner-hold-ms': num('N', 'owner release: after this wait it goes wherever there is room', { min: 0, default: D.ownerHoldMs }),
  'flow-look-ahead': int('N', "owner release: how deep into each tenant's queue a ready request is looked for", { min: 1, default: D.lookAhead }),
  'flow-owner-pass-ms': num('N', "owner release: inside a tenant, a request whose cache owner has room passes earlier ones that would go cold (past their hold) while those have waited under N ms; 0: never", { min: 0, default: D.ownerPassMs }),
  'flow-finish-first': oneOf(['on', 'off'], 'on|off', 'owner release: a request whose tenant has nothing else queued goes at once to the replica where its prefill ends first (queued prefill plus its uncached tokens), rather than wait for its cache owner', { default: D.finishFirst ? 'on' : 'off' }),
  'flow-charge': oneOf(FLOW_CHARGES, 'prompt|uncached', "owner release: what a dispatched request costs its tenant in the fair share: its prompt tokens, or those the warmest replica with room does not cache", { default: D.charge }),
});

/** The tuning flags: each needs flow control on. */
const TUNING = Object.keys(FLOW_OPTIONS).filter((name) => name !== 'flow-control');

/** The flags over the config file's `flow-control`; tuning flags need it on. */
export function readFlowFlags(flags: Flags, current: FlowControlConfig): FlowControlConfig {
  const option = readerOf(FLOW_OPTIONS, flags);
  const out: FlowControlConfig = {
    ...current,
    maxQueued: option('flow-max-queued') ?? current.maxQueued,
    maxQueuedPerTenant: option('flow-max-queued-per-tenant') ?? current.maxQueuedPerTenant,
    maxWaitMs: option('flow-max-wait-ms') ?? current.maxWaitMs,
    saturation: {
      queueDepth: option('flow-queue-depth') ?? current.saturation.queueDepth,
      kvUsage: option('flow-kv-usage') ?? current.saturation.kvUsage,
      queuedPrefillMs: option('flow-queued-prefill-ms') ?? current.saturation.queuedPrefillMs,
    },
    release: option('flow-release') ?? current.release,
    ownerSlackTokens: option('flow-owner-slack-tokens') ?? current.ownerSlackTokens,
    ownerHoldMs: option('flow-owner-hold-ms') ?? current.ownerHoldMs,
    lookAhead: option('flow-look-ahead') ?? current.lookAhead,
    ownerPassMs: option('flow-owner-pass-ms') ?? current.ownerPassMs,
    finishFirst: (option('flow-finish-first') ?? (current.finishFirst ? 'on' : 'off')) === 'on',
    charge: option('flow-charge') ?? current.charge,
  };
  out.enabled = option('flow-control') === true || current.enabled;
  const given = TUNING.find((name) => flags.has(name));
  if (given !== undefined && !out.enabled) {
    throw new UsageError(`--${given} needs --flow-control (or flow-control.enabled in the config)`);
  }
  if (out.maxQueuedPerTenant > out.maxQueued) {
    throw new UsageError(
      `--flow-max-queued-per-tenant (${out.maxQueuedPerTenant}) must not exceed --flow-max-queued (${out.maxQueued})`,
    );
  }
  return out;
}
