/**
 * The real router behind the fleet's SimRouter interface. The fleet numbers replicas 0..N-1;
 * the router names them `r0`..; ids and positions coincide because they are added in order.
 * A fleet that changes size (`FleetScaling`) adds replica i as `ri` when it is ready and removes
 * it when it drains, as the gateway does for a watched pool (`src/serving/pool.ts`); the router's
 * ids then run ahead of the fleet's numbers, and the bridge maps one to the other.
 */
import { loraLoadMs, resolveLoraConfig } from '../engine/lora.ts';
import { type EngineOptions, makeEngineConfig } from '../engine/options.ts';
import type { KvEvent } from '../kv/events.ts';
import type { BlockKey } from '../kv/blockKey.ts';
import { cpuReloadMs, DEFAULT_CPU_KV_GBPS } from '../engine/connector/offloading.ts';
import { kvBytesPerToken, kvPoolTokens, prefillUsPerToken } from '../model/cost.ts';
import {
  type ApproxForgetMode,
  type ApproxForgetting,
  approxForgetting,
  type LlmdPrefixConfig,
  peerForgetMode,
} from '../router/index/approxForgetting.ts';
import { DEFAULT_APPROX_CAPACITY_BLOCKS } from '../router/index/approxIndex.ts';
import { DEFAULT_STALE_MS } from '../router/defaults.ts';
import { type ApproxTiers, Router } from '../router/router.ts';
import type { ReplicaReport, SimRouteRequest, SimRouter } from './fleet.ts';
import { MultiRouter, routeOrNull } from './multiRouter.ts';
import { type ReplicaGroup, replicaSpeeds } from './replicaGroups.ts';
import type { RouterOptions, ViewOptions } from './types.ts';

/**
 * Presizing the index past this (~330 MB of arena and key table, the arena's pages mapped only
 * as it fills) is left to growth. A fleet's pools fill within a simulated minute under load, so
 * the index reaches their sum, and each growth on the way is a pass over the whole key table:
 * with the cap at 2^21, a 352-replica run (12.3 M blocks in its pools) grew three times, 1.65 s
 * of its 22 s, and held the old table beside the new one at each.
 */
const MAX_PRESIZED_KEYS = 1 << 24;

/** What the router needs of a simulation's config (a SimConfig is one). */
export interface SimRouterConfig {
  replicas: number;
  seed: number;
  engine: EngineOptions;
  router: RouterOptions;
  view: ViewOptions;
  /** A mixed fleet: the router gets each replica's speed (replicaGroups.ts). */
  fleet?: ReplicaGroup[];
}

export function makeSimRouter(config: SimRouterConfig): SimRouter {
  const routers = config.router.routers ?? 1;
  if (routers > 1) {
    const cores = Array.from({ length: routers }, (_, i) => makeRouterCore(config, i));
    return new MultiRouter(cores, replicaNames(config.replicas), {
      syncMs: config.router.syncMs ?? null,
      wantsEvents: config.router.index === 'events',
    });
  }
  return new RouterBridge(
    makeRouterCore(config, 0),
    replicaNames(config.replicas),
    config.router.index === 'events',
    approxTiersOf(config),
  );
}

export function replicaNames(count: number): string[] {
  return Array.from({ length: count }, (_, i) => `r${i}`);
}

/** Router `index` of a simulation (several when gateways are modelled; each its own seed). */
function makeRouterCore(config: SimRouterConfig, index: number): Router {
  const names = replicaNames(config.replicas);
  const r = config.router;
  const engine = makeEngineConfig(config.engine);
  const forgetting = peerForgetting(r.approxForget, r.policy, engine.blockSize, r.llmdPrefix);
  // llm-d's scorer hashes only a prompt's first blocks: its score counts those (llmd.ts).
  const prefixMaxBlocks = r.index === 'approx' ? forgetting?.maxPrefixBlocks : undefined;
  return new Router({
    replicas: names,
    ...(config.fleet && { speeds: replicaSpeeds(config.engine, config.fleet) }),
    policy: r.policy,
    // What a policy may know of the engines: their sequence limit and prefill time per token.
    policyOptions: {
      maxSeqs: engine.maxSeqs,
      prefillUsPerToken: prefillUsPerToken(engine.spec),
      ...r.policyOptions,
      queueSource: r.queueSource,
      ...(forgetting && { treeForgetting: forgetting }),
      ...(prefixMaxBlocks !== undefined && { prefixMaxBlocks }),
      ...(r.loraBlind && { loraBlind: true }),
      ...(config.engine.lora && { loraLoadTokens: loraLoadTokens(config.engine) }),
      ...(engine.cpuOffload && {
        cpuReloadUsPerToken:
          cpuReloadMs(
            1,
            kvBytesPerToken(engine.spec.model, engine.spec.kvDtype),
            engine.cpuOffload.cpuKvGbps ?? DEFAULT_CPU_KV_GBPS,
          ) * 1000,
      }),
    },
    indexMode: r.index,
    // A peer's record knows neither the engine's pool nor its CPU tier: its own bounds only.
    ...(r.index === 'approx' && forgetting && { approxForgetting: forgetting }),
    // The approximate index models each replica's CPU tier (and its GPU record the engine's
    // pool) only when the engines have one: without a tier the run is as before.
    ...(r.index === 'approx' &&
      !forgetting &&
      engine.cpuOffload && { approxTiers: names.map(() => approxTiersOf(config)!) }),
    ...(r.kvThreshold !== undefined && { kvThreshold: r.kvThreshold }),
    // Reports arrive every reportMs; only a replica that stopped reporting should look stale.
    staleMs: r.staleLimitMs ?? Math.max(DEFAULT_STALE_MS, 3 * config.view.reportMs),
    ...(r.overlayTtlMs !== undefined && { overlayTtlMs: r.overlayTtlMs }),
    seed: config.seed + index,
    // Every replica's pool full of distinct blocks, so the index need not grow mid-run (capped:
    // a fleet past ~480 replicas of this size grows past it).
    expectedKeys: Math.min(config.replicas * kvBlocksPerReplica(config), MAX_PRESIZED_KEYS),
  });
}

/**
 * The forgetting `--approx-forget` asks of `policy`'s approximate records, in blocks of
 * `blockSize` tokens; undefined: kvroute's own (the default, unchanged).
 */
function peerForgetting(
  mode: ApproxForgetMode | undefined,
  policy: string,
  blockSize: number,
  llmdPrefix?: LlmdPrefixConfig,
): ApproxForgetting | undefined {
  if (mode === undefined) return undefined;
  const peer = mode === 'peer' ? peerForgetMode(policy) : mode;
  if (peer === 'kvroute') return undefined;
  return approxForgetting(peer, blockSize, DEFAULT_APPROX_CAPACITY_BLOCKS, llmdPrefix);
}

/** The engines' adapter load time in prefill tokens: the cost policy's LoRA term. */
function loraLoadTokens(engine: EngineOptions): number {
  const spec = makeEngineConfig(engine).spec;
  const ms = loraLoadMs(spec.model, resolveLoraConfig(engine.lora!));
  return Math.round((ms * 1000) / prefillUsPerToken(spec));
}

/**
 * The tiers the approximate index models per replica, only when the engines have a CPU tier and
 * the records forget as kvroute's own do (without a tier the run is as before).
 */
function approxTiersOf(config: SimRouterConfig): ApproxTiers | undefined {
  const r = config.router;
  const engine = makeEngineConfig(config.engine);
  if (r.index !== 'approx' || !engine.cpuOffload) return undefined;
  if (peerForgetting(r.approxForget, r.policy, engine.blockSize)) return undefined;
  return { kvBlocks: kvBlocksPerReplica(config), cpuKvBlocks: engine.cpuOffload.cpuBlocks };
}

function kvBlocksPerReplica(config: SimRouterConfig): number {
  const engine = makeEngineConfig(config.engine);
  return engine.kvBlocks ?? Math.floor(kvPoolTokens(engine.spec) / engine.blockSize);
}

export class RouterBridge implements SimRouter {
  readonly #router: Router;
  readonly #names: string[];
  readonly wantsEvents: boolean;
  readonly #tiers: ApproxTiers | undefined;
  /** Router id -> fleet number, once a replica joined mid-run (null: they coincide). */
  #fleetIndexOf: number[] | null = null;

  constructor(router: Router, names: readonly string[], wantsEvents: boolean, tiers?: ApproxTiers) {
    this.#router = router;
    this.#names = [...names];
    this.wantsEvents = wantsEvents;
    this.#tiers = tiers;
  }

  route(req: SimRouteRequest, nowMs: number): { replicaId: number; uncachedTokens: number } | null {
    const decision = routeOrNull(this.#router, req, nowMs);
    const map = this.#fleetIndexOf;
    if (decision === null || map === null) return decision;
    return { replicaId: map[decision.replicaId]!, uncachedTokens: decision.uncachedTokens };
  }

  addReplica(replica: number): void {
    const name = `r${replica}`;
    this.#names[replica] = name;
    const id = this.#router.addReplica(name, undefined, this.#tiers);
    if (this.#fleetIndexOf === null && id === replica) return;
    this.#fleetIndexOf ??= Array.from({ length: id }, (_, i) => i);
    this.#fleetIndexOf[id] = replica;
  }

  removeReplica(replica: number): void {
    this.#router.removeReplica(this.#names[replica]!);
  }

  prefixBlocks(blockKeys: readonly BlockKey[], nowMs: number): ArrayLike<number> {
    return this.#router.prefixBlocks(blockKeys, nowMs);
  }

  onFirstToken(id: string, nowMs: number): void {
    this.#router.onFirstToken(id, nowMs);
  }

  onFinished(id: string, nowMs: number): void {
    this.#router.onFinished(id, nowMs);
  }

  onReport(replica: number, report: ReplicaReport, nowMs: number): void {
    this.#router.onReport(this.#names[replica]!, report, nowMs);
  }

  applyEvents(replica: number, events: readonly KvEvent[], nowMs: number): void {
    this.#router.applyEvents(this.#names[replica]!, events, nowMs);
  }

  markDown(replica: number): void {
    this.#router.markDown(this.#names[replica]!);
  }

  stats(): Record<string, number> {
    const { policy: _policy, ...counters } = this.#router.counters();
    return counters;
  }

  markUp(replica: number): void {
    this.#router.markUp(this.#names[replica]!);
  }

  // The audit's repairs (`audit.ts`).
  clearReplica(replica: number): void {
    this.#router.clearReplica(this.#names[replica]!);
  }

  distrustEvents(replica: number, capacityBlocks: number): void {
    this.#router.distrustEvents(this.#names[replica]!, capacityBlocks);
  }

  trustEvents(replica: number): void {
    this.#router.trustEvents(this.#names[replica]!);
  }

  indexedBlocks(replica: number): number {
    const name = this.#names[replica]!;
    return this.#router.snapshot().replicas.find((r) => r.name === name)?.indexedBlocks ?? 0;
  }
}
