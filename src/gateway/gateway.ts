/**
 * `startGateway`: wires the router core to the outside world over the configured backends. The
 * generate path, the HTTP routes, the metrics scraper, the health checker and the KV event
 * subscriber each live in a file of their own and talk to the router only through its facade,
 * with the wall clock read here. (With no backend, `kvroute serve` starts an embedded fleet
 * first: `src/embedded/`.)
 */
import type { Server } from 'node:http';
import type { QueueView } from '../admission/queueBound.ts';
import { closeServer, createHttpServer, listen } from '../openai/http.ts';
import { Router } from '../router/index.ts';
import { GatewayAdmission } from './admission.ts';
import { Authenticator } from './auth.ts';
import { DashboardFeed } from './dashboard/feed.ts';
import { dashboardRoutes } from './dashboard/routes.ts';
import { sampleGateway } from './dashboard/state.ts';
import { type Backend, closeBackends, makeBackends } from './backends.ts';
import type { GatewayConfig } from './config.ts';
import { GatewayError } from './errors.ts';
import type { GenerateContext } from './generate.ts';
import { HealthChecker } from './health.ts';
import { type Logger, RateLimitedLog, silentLogger } from './log.ts';
import { GatewayMetrics } from './metrics.ts';
import { PrefillWatch } from './prefillWatch.ts';
import { makeRequestListener } from './routes.ts';
import { MetricsScraper } from './scraper.ts';
import { EventSubscriber } from './subscriber.ts';
import { makePromptTokenizer } from '../tokenizer/promptTokenizer.ts';

export interface ReplicaInfo {
  name: string;
  url: string;
  events: string | null;
  replay: string | null;
}

export interface GatewayHandle {
  url: string;
  port: number;
  replicas: ReplicaInfo[];
  router: Router;
  metrics: GatewayMetrics;
  close(): Promise<void>;
}

export interface GatewayOptions {
  /** Where the gateway logs (default: nowhere; `kvroute serve` passes its own). */
  logger?: Logger;
}

/** A replica whose KV events fail to decode logs at most this often. */
const DECODE_ERROR_LOG_MS = 10_000;

export async function startGateway(
  config: GatewayConfig,
  options: GatewayOptions = {},
): Promise<GatewayHandle> {
  const logger = options.logger ?? silentLogger();
  if (config.backends.length === 0) {
    throw new GatewayError('ERR_CONFIG', 'no backend configured', { param: 'backends' });
  }
  const tokenizer = makePromptTokenizer(config.tokenizer, config.chatTemplate);
  const backends = makeBackends(config.backends);
  const byName = new Map(backends.map((b) => [b.name, b]));
  const router = new Router({
    replicas: backends.map((b) => b.name),
    policy: config.policy,
    indexMode: config.index,
    kvThreshold: config.kvThreshold,
    staleMs: config.staleMs,
    seed: config.seed,
  });
  const metrics = new GatewayMetrics({
    replicaLoads: () =>
      router.snapshot().replicas.map((r) => ({
        name: r.name,
        queuedPromptTokens: r.queuedPromptTokens,
        inFlight: r.inFlight,
        up: r.healthy,
      })),
    knownTenants: configuredTenants(config),
  });
  const prefillWatch = new PrefillWatch(router);
  const { health, scraper, subscriber, markDown, probe } = watchBackends(
    config,
    backends,
    router,
    logger,
    prefillWatch,
  );

  let ledgerIds = 0;
  const generate: GenerateContext = {
    router,
    backends,
    byName,
    auth: new Authenticator(config.apiKeys, config.tenantSalts, config),
    admission: new GatewayAdmission(
      config.admission,
      () => healthyQueues(router),
      (limit, tenant) => metrics.recordRejection(limit, tenant),
    ),
    tokenizer,
    metrics,
    logger,
    prefillWatch,
    blockSize: config.blockSize,
    bodyLimitBytes: config.bodyLimitBytes,
    maxRetries: config.maxRetries,
    firstByteTimeoutMs: config.firstByteTimeoutMs,
    markDown,
    probe,
    nextLedgerId: () => `gw-${++ledgerIds}`,
  };
  const replicaState = () => {
    const snap = router.snapshot(Date.now());
    return {
      ...snap,
      replicas: snap.replicas.map((r) => {
        const b = byName.get(r.name)!;
        const replica = backends.indexOf(b);
        return {
          ...r,
          url: b.config.url,
          events: b.config.events,
          probing: health.watching.includes(replica),
          subscriber: subscriber?.stats(replica) ?? null,
        };
      }),
    };
  };

  const dashboard = new DashboardFeed(() =>
    sampleGateway(router.snapshot(Date.now()), metrics, Date.now(), performance.now()),
  );
  const server: Server = createHttpServer(
    config,
    makeRequestListener({
      generate,
      replicaState,
      accessLog: config.accessLog,
      extraRoutes: dashboardRoutes(dashboard, (h) => generate.auth.authorizeAdmin(h)),
    }),
  );
  const stopWatching = async () => {
    dashboard.close();
    await Promise.allSettled([scraper.close(), health.close(), subscriber?.close()]);
    await closeBackends(backends);
  };
  let bound: { port: number; url: string };
  try {
    bound = await listen(server, config.port, config.host);
  } catch (err) {
    await stopWatching();
    throw err;
  }
  scraper.start();
  subscriber?.start();

  let closed: Promise<void> | null = null;
  return {
    ...bound,
    replicas: backends.map((b) => ({
      name: b.name,
      url: b.config.url,
      events: b.config.events,
      replay: b.config.replay,
    })),
    router,
    metrics,
    close() {
      closed ??= (async () => {
        await closeServer(server);
        await stopWatching();
      })();
      return closed;
    },
  };
}

/**
 * What keeps the router's view of the backends current: the health checker (brings a replica
 * back), the metrics scraper (load reports) and, in events mode, the KV event subscriber. Every
 * change of a replica's state is logged here.
 */
function watchBackends(
  config: GatewayConfig,
  backends: readonly Backend[],
  router: Router,
  logger: Logger,
  prefillWatch: PrefillWatch,
) {
  const byReplica = new Map(backends.map((b, i) => [i, b]));
  const nameOf = (replica: number): string => byReplica.get(replica)!.name;
  const down = new Set<string>();
  let subscriber: EventSubscriber | null = null;
  const health = new HealthChecker(
    backends.map((b, replica) => ({ replica, url: b.config.url })),
    (replica) => {
      down.delete(nameOf(replica));
      router.markUp(nameOf(replica));
      logger.info({ replica: nameOf(replica) }, 'replica up: its health probe answered');
      subscriber?.rebuild(replica);
    },
  );
  const markDown = (backend: Backend, reason: string): void => {
    if (down.has(backend.name)) return;
    down.add(backend.name);
    router.markDown(backend.name);
    logger.warn({ replica: backend.name, reason }, 'replica down');
    health.watch(backends.indexOf(backend));
  };
  const probe = async (backend: Backend): Promise<boolean> => {
    const healthy = await health.probe(backends.indexOf(backend));
    if (!healthy) markDown(backend, 'its health probe failed or timed out');
    return healthy;
  };
  const scraper = new MetricsScraper(
    backends.map((b, replica) => ({ replica, url: b.config.url })),
    {
      intervalMs: config.scrapeMs,
      isDown: (replica) => down.has(nameOf(replica)),
      onReport: (replica, report, nowMs) => router.onReport(nameOf(replica), report, nowMs),
      onUnreachable: (replica, err) => markDown(byReplica.get(replica)!, err.message),
      onSilent: (replica) => void probe(byReplica.get(replica)!),
    },
  );
  const decodeErrors = new RateLimitedLog(DECODE_ERROR_LOG_MS);
  subscriber =
    config.index === 'events'
      ? new EventSubscriber(
          backends.flatMap((b, replica) =>
            b.config.events ? [{ replica, events: b.config.events, replay: b.config.replay }] : [],
          ),
          {
            onEvents: (replica, events, nowMs) => {
              router.applyForeignEvents(nameOf(replica), events, nowMs);
              prefillWatch.onEvents(nameOf(replica), nowMs);
            },
            onRestart: (replica) => {
              logger.warn(
                { replica: nameOf(replica) },
                'engine restarted (its event sequence went back): its cached blocks are forgotten',
              );
              router.applyForeignEvents(
                nameOf(replica),
                [{ type: 'AllBlocksCleared' }],
                Date.now(),
              );
            },
            onDecodeError: (replica, err) =>
              decodeErrors.maybe(nameOf(replica), Date.now(), (heldBack) =>
                logger.warn(
                  { replica: nameOf(replica), err, heldBack },
                  'a KV event batch could not be decoded; the replica is known less well',
                ),
              ),
          },
        )
      : null;
  return { health, scraper, subscriber, markDown, probe };
}

/** The healthy replicas' ledgers, for the fleet queue bound. */
function healthyQueues(router: Router): QueueView[] {
  return router
    .snapshot(Date.now())
    .replicas.filter((r) => r.verdict !== 'down')
    .map((r) => ({ queuedPromptTokens: r.queuedPromptTokens, eligible: r.verdict === 'eligible' }));
}

/** Every tenant the config names: the metrics' `tenant` label takes only these. */
function configuredTenants(config: GatewayConfig): string[] {
  return [
    ...new Set([
      ...config.apiKeys.map((k) => k.tenant),
      ...Object.keys(config.tenantSalts),
      ...Object.keys(config.admission.tenantLimits),
      ...Object.keys(config.admission.tenantPriority),
    ]),
  ];
}
