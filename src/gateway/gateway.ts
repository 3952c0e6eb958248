/**
 * `startGateway`: wires the router core to the outside world over the configured backends. The
 * backends are grouped into model pools (`src/serving/pools.ts`: one router, tokenizer and set of backend
 * watches per base model); the generate path, the HTTP routes and the admin API each live in a
 * file of their own, with the wall clock read there. (With no backend, `kvroute serve` starts an
 * embedded fleet first: `src/embedded/`.)
 */
import { DEFAULT_PD_THRESHOLD_TOKENS } from './pd/decider.ts';
import { makePdContext } from './pd/handler.ts';
import { PdMetrics } from './pd/metrics.ts';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';

import { closeServer, createHttpServer, listen } from '../openai/http.ts';
import type { Router } from '../router/index.ts';

import { GatewayAdmission } from '../serving/admission.ts';
import { Authenticator } from '../serving/auth.ts';
import { DashboardFeed } from './dashboard/feed.ts';
import { dashboardRoutes } from './dashboard/routes.ts';
import { sampleGateway } from './dashboard/state.ts';
import { backendNames } from '../serving/backends.ts';
import { ReplicaLabels } from '../serving/replicaLabels.ts';
import type { GatewayConfig } from '../serving/config.ts';
import { GatewayError } from '../serving/errors.ts';

import type { GenerateContext } from './generateContext.ts';
import { type Logger, silentLogger } from '../serving/log.ts';
import type { GatewayMetrics } from '../serving/metrics.ts';
import { type GatewayPlanner, sharePlannerOver } from '../serving/planner.ts';
import type { BackendInfo } from '../serving/pool.ts';
import type { ModelPools } from '../serving/pools.ts';
import { applyLive, type ReloadResult } from './reload.ts';
import { makeRequestListener, type RoutesContext } from './routes.ts';
import { type EngineFollower, followEngines } from '../sync/discovery.ts';
import { StateSync, type SyncConfig } from '../sync/stateSync.ts';
import {
  poolsOf,
  centralEventsOf,
  metricsOf,
  flowControlOf,
  plannerOf,
} from '../serving/fromConfig.ts';

export interface ReplicaInfo {
  name: string;
  url: string;
  events: string | null;
  replay: string | null;
  /** Base model of its pool, null when not known. */
  model: string | null;
}

export interface GatewayHandle {
  url: string;
  port: number;
  /** The backends configured at start. */
  replicas: ReplicaInfo[];
  /** The router of the first model pool (the only one in a single-model gateway). */
  readonly router: Router;
  pools: ModelPools;
  metrics: GatewayMetrics;
  /** The routing state shared with other gateways (`--nats`), or null. */
  sync: StateSync | null;
  /** The online planner (`--planner`), or null. */
  planner: GatewayPlanner | null;
  /** Every backend now, with its state. */
  backends(): BackendInfo[];
  /**
   * A new configuration: the backend set is diffed (added ones start cold, removed ones drain),
   * what can change live does, and the rest is reported as needing a restart.
   */
  reload(next: GatewayConfig): ReloadResult;
  close(): Promise<void>;
}

export interface GatewayOptions {
  /** Where the gateway logs (default: nowhere; `kvroute serve` passes its own). */
  logger?: Logger;
}

export async function startGateway(
  config: GatewayConfig,
  options: GatewayOptions = {},
): Promise<GatewayHandle> {
  const logger = options.logger ?? silentLogger();
  // With NATS and no backend, the backends are the engines registered there (discovery).
  if (config.backends.length === 0 && config.nats === null) {
    throw new GatewayError('ERR_CONFIG', 'no backend configured', { param: 'backends' });
  }
  let lateMetrics: GatewayMetrics | null = null;
  let sync: StateSync | null = null;
  const pools: ModelPools = poolsOf(
    config,
    logger,
    () => lateMetrics,
    {
      routed: (model, decision, request) => sync?.routed(model, decision, request),
      released: (model, requestId, stage) => sync?.released(model, requestId, stage),
    },
    await centralEventsOf(config, logger),
  );
  const shared = syncOf(config, pools, logger);
  sync = shared;
  await pools.addConfigured(config.backends);
  const metrics = metricsOf(config, pools);
  if (shared !== null) metrics.followSync(() => shared.stats());
  lateMetrics = metrics;

  const planner = plannerOf(config, metrics, logger);
  if (planner && shared) sharePlannerOver(planner, shared);
  planner?.start();
  const generate = generateContextOf(config, pools, metrics, logger, planner);
  const dashboard = new DashboardFeed(() =>
    sampleGateway(pools.snapshot(Date.now()), metrics, Date.now(), performance.now()),
  );
  const routes = routesContextOf(config, generate, pools, sync, planner, dashboard);
  const server: Server = createHttpServer(config, makeRequestListener(routes));
  let bound: { port: number; url: string };
  try {
    bound = await listen(server, config.port, config.host);
  } catch (err) {
    await closeParts({ dashboard, planner, sync, pools });
    throw err;
  }
  pools.start();
  dashboard.start();
  let discovery: EngineFollower | null = null;
  let closing = false;
  if (config.nats !== null && config.backends.length === 0) {
    void followRegisteredEngines(config.nats, pools, logger).then((follower) => {
      if (closing) void follower?.close();
      else discovery = follower;
    });
  }

  let current = config;
  let closed: Promise<void> | null = null;
  return {
    ...bound,
    replicas: replicasOf(config, pools),
    get router() {
      return pools.first!.router;
    },
    pools,
    metrics,
    sync,
    planner,
    backends: () => pools.backends(),
    reload(next) {
      const result = applyLive(current, next, { pools, generate, routes, logger });
      current = { ...next };
      return result;
    },
    close() {
      closing = true;
      closed ??= closeParts({ generate, dashboard, planner, discovery, server, sync, pools });
      return closed;
    },
  };
}

/** The routing state shared with other gateways (`--nats`), or null. */
function syncOf(config: GatewayConfig, pools: ModelPools, logger: Logger): StateSync | null {
  if (config.nats === null) return null;
  return new StateSync(
    config.nats,
    {
      routerOf: (model) => pools.poolFor(model)?.router,
      routers: () => pools.all().map((p) => ({ model: p.model, router: p.router })),
    },
    logger,
  );
}

/** What a gateway closes, in this order; absent: not started (a failed listen). */
interface GatewayParts {
  generate?: GenerateContext;
  dashboard: DashboardFeed;
  planner: GatewayPlanner | null;
  discovery?: EngineFollower | null;
  server?: Server;
  sync: StateSync | null;
  pools: ModelPools;
}

async function closeParts(parts: GatewayParts): Promise<void> {
  parts.generate?.flow?.close();
  parts.dashboard.close();
  await parts.planner?.close();
  await parts.discovery?.close();
  if (parts.server) await closeServer(parts.server);
  await parts.sync?.close();
  await parts.pools.close();
}

/** What the generate path reads: auth, admission, flow control, P/D, the replicas' labels. */
function generateContextOf(
  config: GatewayConfig,
  pools: ModelPools,
  metrics: GatewayMetrics,
  logger: Logger,
  planner: GatewayPlanner | null,
): GenerateContext {
  let ledgerIds = 0;
  const labels = ReplicaLabels.inOrder(
    config.exposeReplicaAddresses,
    backendNames(config.backends),
  );
  return {
    pools,
    auth: new Authenticator(config.apiKeys, config.tenantSalts, config),
    admission: new GatewayAdmission(config.admission, (limit, tenant) =>
      metrics.recordRejection(limit, tenant),
    ),
    flow: flowControlOf(config, metrics),
    metrics,
    logger,
    blockSize: config.blockSize,
    bodyLimitBytes: config.bodyLimitBytes,
    maxRetries: config.maxRetries,
    firstByteTimeoutMs: config.firstByteTimeoutMs,
    nextLedgerId: () => `gw-${++ledgerIds}`,
    labels,
    sessionHeader: config.sessionAffinity?.header ?? null,
    planner,
    pd: makePdContext(
      {
        thresholdTokens: config.pdThreshold ?? DEFAULT_PD_THRESHOLD_TOKENS,
        kvThreshold: config.kvThreshold,
      },
      new PdMetrics(metrics.registry),
    ),
  };
}

/** The HTTP routes' context: the generate path, the replica state, the dashboard and planner. */
function routesContextOf(
  config: GatewayConfig,
  generate: GenerateContext,
  pools: ModelPools,
  sync: StateSync | null,
  planner: GatewayPlanner | null,
  dashboard: DashboardFeed,
): RoutesContext {
  const { labels } = generate;
  return {
    generate,
    // With --nats, the sync's state too: this gateway's id, its peers, records applied.
    replicaState: () => ({
      ...pools.snapshot(Date.now()),
      // What the replica headers call each replica (absent when they give addresses).
      ...(!labels.exposeAddresses && { labels: labels.table() }),
      ...(sync !== null && { sync: sync.stats() }),
    }),
    accessLog: config.accessLog,
    extraRoutes: {
      ...dashboardRoutes(dashboard, (h) => generate.auth.authorizeAdmin(h)),
      ...(planner && {
        '/planner/desired': {
          method: 'GET' as const,
          handle: (req: IncomingMessage, res: ServerResponse) => planner.handle(req, res),
        },
      }),
    },
  };
}

/** The backends configured at start, with their pool's model. */
function replicasOf(config: GatewayConfig, pools: ModelPools): ReplicaInfo[] {
  const names = backendNames(config.backends);
  return config.backends.map((b, i) => ({
    name: names[i]!,
    url: b.url,
    events: b.events,
    replay: b.replay,
    model: pools.backends().find((x) => x.name === names[i])?.model ?? null,
  }));
}

/**
 * `--nats` without backends: the engines registered in the cluster's bucket come and go as
 * backends added (cold) and removed (drained), the admin API's path. Starts in the background:
 * NATS may come up after the gateway.
 */
async function followRegisteredEngines(
  nats: SyncConfig,
  pools: ModelPools,
  logger: Logger,
): Promise<EngineFollower | null> {
  const refusedLogged = new Set<string>();
  try {
    return await followEngines(
      {
        url: nats.url,
        cluster: nats.cluster,
        ...(nats.auth !== undefined && { auth: nats.auth }),
        ...(nats.discovery !== undefined && { policy: nats.discovery }),
      },
      {
        onRefuse: (key, why) => {
          // Once per key and reason: a writer repeating itself does not flood the log.
          const seen = `${key}\n${why}`;
          if (refusedLogged.has(seen) || refusedLogged.size >= 1_000) return;
          refusedLogged.add(seen);
          logger.warn({ key, why }, 'NATS: a registered engine was not taken');
        },
        onAdd: (e) => {
          try {
            pools.add({
              url: e.url,
              events: e.events,
              replay: e.replay,
              model: e.model,
              apiKey: null,
            });
          } catch (err) {
            logger.warn({ err, url: e.url }, 'a registered engine could not be added');
          }
        },
        onRemove: (e) => {
          logger.info({ url: e.url }, 'a registered engine left NATS: draining it');
          pools.remove(e.url);
        },
      },
    );
  } catch (err) {
    logger.error({ err, url: nats.url }, 'NATS: cannot follow the registered engines');
    return null;
  }
}
