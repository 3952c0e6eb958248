/**
 * Flow control for a front end (`kvroute serve --flow-control`, `kvroute epp --flow-control`):
 * one `PoolFlowGate` per model pool, made on the pool's first request, pumped on every change
 * of the pool's load (`ModelPool.onLoadChange`). The classes are the config's
 * `priority-classes` (vLLM's priority, lower first: the queue's priority is its negation) and
 * `default` (vLLM's default priority, 0, unless the config names a class `default`). A request's
 * class is its `x-kvroute-priority` header, else its tenant's `priority-class`, else `default`;
 * its tenant is the API key's (or, without client keys, the `x-kvroute-tenant` header's).
 */
import {
  type FlowClass,
  FlowQueue,
  isPoolSaturated,
  type SaturationLimits,
} from '../flow/index.ts';
import { badRequest } from '../openai/errors.ts';
import type { AdmissionConfig } from './admissionConfig.ts';
import type { FlowControlConfig } from './flowConfig.ts';
import {
  FlowCancelled,
  type FlowGateSettings,
  type FlowPass,
  type FlowReadiness,
  type FlowRequest,
  PoolFlowGate,
} from './flowGate.ts';
import { FlowMetrics } from './flowMetrics.ts';
import { ownerReadiness, poolLoadView, replicasToAvoid, saturationLimits } from './flowView.ts';
import type { GatewayMetrics } from './metrics.ts';
import { canPrefill } from './pdRoles.ts';
import type { ModelPool } from './pool.ts';

/** Names a request's priority class (one of `priority-classes`, or `default`). */
export const PRIORITY_HEADER = 'x-kvroute-priority';
export const DEFAULT_CLASS = 'default';

export { FlowCancelled, type FlowPass };

/**
 * The queue's classes: `priority-classes` (vLLM's priority, lower first: the queue's priority is
 * its negation) and `default` (vLLM's 0) unless the config names a class `default`.
 */
function classesOf(priorityClasses: Record<string, number>): FlowClass[] {
  const classes: FlowClass[] = Object.entries(priorityClasses).map(([name, vllmPriority]) => ({
    name,
    priority: -vllmPriority,
  }));
  if (!Object.hasOwn(priorityClasses, DEFAULT_CLASS)) {
    classes.push({ name: DEFAULT_CLASS, priority: 0 });
  }
  return classes;
}

/**
 * Owner release's view of a pool: its replicas that can prefill (`canPrefill`), all of them
 * but in a P/D pool. What it judges is where a prompt is computed (a replica's queued prefill,
 * its cached blocks, finish-first's estimate of where the prefill ends first), and a P/D
 * request's prompt is computed on its prefill leg (`src/gateway/pd/legRoute.ts`, which routes
 * that leg onto the pass's replica); a decode-only replica, which pulls the blocks, would
 * otherwise look like a warm, idle owner and be named.
 */
export function prefillView<V extends ReturnType<typeof poolLoadView>>(
  pool: Pick<ModelPool, 'backendOf'>,
  view: V,
): V {
  const keep = view.names.map((n) => canPrefill(pool.backendOf(n)?.config.role));
  if (keep.every(Boolean)) return view;
  return {
    ...view,
    replicas: view.replicas.filter((_, i) => keep[i]),
    names: view.names.filter((_, i) => keep[i]),
    ids: view.ids.filter((_, i) => keep[i]),
  };
}

export class FlowControl {
  #config: FlowControlConfig;
  #classes: FlowClass[];
  #tenantClass: Record<string, string>;
  #limits: SaturationLimits;
  readonly #prefillUsPerToken: number;
  readonly #metrics: GatewayMetrics;
  readonly #flowMetrics: FlowMetrics;
  readonly #gates = new Map<ModelPool, { gate: PoolFlowGate; unlisten: () => void }>();
  readonly #saturated: (pool: ModelPool) => boolean;
  readonly #avoid: (pool: ModelPool, onto: string | null) => string[];
  readonly #readiness: (pool: ModelPool) => FlowReadiness | null;

  /** `saturated`: the pool's saturation (default: the router's view through `isPoolSaturated`). */
  constructor(
    config: FlowControlConfig,
    admission: Pick<AdmissionConfig, 'priorityClasses' | 'tenantClass' | 'prefillUsPerToken'>,
    metrics: GatewayMetrics,
    saturated?: (pool: ModelPool) => boolean,
  ) {
    this.#config = config;
    this.#metrics = metrics;
    this.#tenantClass = admission.tenantClass;
    this.#classes = classesOf(admission.priorityClasses);
    this.#limits = saturationLimits(config.saturation);
    this.#prefillUsPerToken = admission.prefillUsPerToken;
    const view = (pool: ModelPool) => poolLoadView(pool, Date.now(), this.#prefillUsPerToken);
    this.#saturated = saturated ?? ((pool) => isPoolSaturated(view(pool), this.#limits));
    this.#avoid = saturated
      ? () => []
      : (pool, onto) => replicasToAvoid(view(pool), this.#limits, onto);
    // Owner release reads the router's view; a test's own saturation has none: room release.
    this.#readiness = saturated
      ? () => null
      : (pool) => {
          const c = this.#config;
          if (c.release !== 'owner') return null;
          const nowMs = Date.now();
          const v = prefillView(pool, poolLoadView(pool, nowMs, this.#prefillUsPerToken));
          return ownerReadiness(pool, v, this.#limits, nowMs, {
            slackTokens: c.ownerSlackTokens,
            holdMs: c.ownerHoldMs,
            finishFirst: c.finishFirst,
            charge: c.charge,
            prefillUsPerToken: this.#prefillUsPerToken,
          });
        };
    this.#flowMetrics = new FlowMetrics(metrics.registry, () =>
      [...this.#gates.values()].flatMap((g) => g.gate.queued()),
    );
  }

  /**
   * A config reload: the classes and the tenants' classes (`priority-classes`, each tenant's
   * `priority-class`), the weights, bounds, deadline, release rule and saturation limits apply
   * from now on, to every pool's queue (`PoolFlowGate.reconfigure`: waiting requests keep their
   * places). Turning flow control on or off needs a restart (the caller's part).
   */
  reconfigure(
    config: FlowControlConfig,
    admission: Pick<AdmissionConfig, 'priorityClasses' | 'tenantClass'>,
  ): void {
    const classes = classesOf(admission.priorityClasses);
    const settings = { ...this.#gateSettings(config), classes };
    // Checked on a queue of no pool first: a setting the queue refuses changes nothing.
    new FlowQueue({ ...settings, tenantWeights: config.tenantWeights });
    this.#config = config;
    this.#classes = classes;
    this.#tenantClass = admission.tenantClass;
    this.#limits = saturationLimits(config.saturation);
    for (const { gate } of this.#gates.values()) gate.reconfigure(settings);
  }

  /** The class names a request may name in its header. */
  get classNames(): string[] {
    return this.#classes.map((c) => c.name);
  }

  /** The request's class: its header's (a 400 for a name that is not a class), else its tenant's. */
  classOf(header: string | undefined, tenant: string | null): string {
    if (header !== undefined && header !== '') {
      if (!this.#classes.some((c) => c.name === header)) {
        throw badRequest(
          `${PRIORITY_HEADER} must name a priority class (${this.classNames.join(', ')}), got '${header}'`,
        );
      }
      return header;
    }
    return (tenant !== null && this.#tenantClass[tenant]) || DEFAULT_CLASS;
  }

  /**
   * A pass: go on now (to its replica, when finish-first chose one; in a P/D pool the prefill
   * leg's, `prefillView`). Otherwise a promise that
   * resolves with the pass when the request may go on; it rejects with a 503 ApiError past the
   * deadline, or FlowCancelled when `signal` aborts. Throws a 429 ApiError when there is no room
   * to wait.
   */
  enter(
    pool: ModelPool,
    req: Omit<FlowRequest, 'tenant'> & { tenant: string | null },
    signal?: AbortSignal,
  ): Promise<FlowPass> | FlowPass {
    return this.#gateOf(pool).enter({ ...req, tenant: req.tenant ?? '' }, signal);
  }

  /**
   * The pool's replicas a request let through should not be routed to: every one but `onto`,
   * the replica its pass names (finish-first chose it); else those without room, empty when
   * every replica (or none) has room.
   */
  avoidFor(pool: ModelPool, onto: string | null = null): string[] {
    return this.#avoid(pool, onto);
  }

  /** Requests waiting now, all pools. */
  get queued(): number {
    let n = 0;
    for (const { gate } of this.#gates.values()) n += gate.size;
    return n;
  }

  /** Every waiting request answered 503; no more hooks on the pools. */
  close(): void {
    for (const { gate, unlisten } of this.#gates.values()) {
      unlisten();
      gate.close();
    }
    this.#gates.clear();
  }

  #gateSettings(c: FlowControlConfig): Omit<FlowGateSettings, 'classes'> {
    return {
      tenantWeights: c.tenantWeights,
      maxQueued: c.maxQueued,
      maxQueuedPerTenant: c.maxQueuedPerTenant,
      maxWaitMs: c.maxWaitMs,
      lookAhead: c.lookAhead,
      passMs: c.ownerPassMs,
    };
  }

  #gateOf(pool: ModelPool): PoolFlowGate {
    const known = this.#gates.get(pool);
    if (known) return known.gate;
    const gate = new PoolFlowGate({
      ...this.#gateSettings(this.#config),
      classes: this.#classes,
      saturated: () => this.#saturated(pool),
      readiness: () => this.#readiness(pool),
      poolLabel: this.#metrics.modelLabel(pool.model),
      tenantLabel: (t) => this.#metrics.tenantLabel(t === '' ? null : t),
      metrics: this.#flowMetrics,
      nowMs: () => performance.now(),
    });
    const unlisten = pool.onLoadChange(() => gate.pump());
    this.#gates.set(pool, { gate, unlisten });
    return gate;
  }
}
