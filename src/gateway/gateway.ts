/**
 * `startGateway`: wires the router core to the outside world. The HTTP edge (this file) answers
 * the gateway's own endpoints and turns errors into OpenAI JSON; the generate path, the metrics
 * scraper, the health checker and the KV event subscriber each live in a file of their own and
 * talk to the router only through its facade, with the wall clock read here.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { closeServer, findRoute, listen, sendError, sendJson } from '../openai/http.ts';
import { Router } from '../router/index.ts';
import { Authenticator } from './auth.ts';
import { type Backend, closeBackends, listModels, makeBackends } from './backends.ts';
import type { GatewayConfig } from './config.ts';
import { toApiError } from './errors.ts';
import { type EmbeddedFleet, startEmbeddedFleet } from './fleet.ts';
import { type GenerateContext, handleGenerate } from './generate.ts';
import { HealthChecker } from './health.ts';
import { GatewayMetrics } from './metrics.ts';
import { MetricsScraper } from './scraper.ts';
import { EventSubscriber } from './subscriber.ts';
import { makePromptTokenizer } from '../tokenizer/promptTokenizer.ts';

/** A slow or stalled client may not hold a socket forever while sending its request. */
const REQUEST_TIMEOUT_MS = 60_000;
const HEADERS_TIMEOUT_MS = 10_000;

export interface GatewayOptions {
  /** Modeled speedup of the embedded fleet's engines (only when no backend is configured). */
  embeddedSpeedup?: number;
}

export interface ReplicaInfo {
  name: string;
  url: string;
  events: string | null;
  replay: string | null;
  embedded: boolean;
}

export interface GatewayHandle {
  url: string;
  port: number;
  replicas: ReplicaInfo[];
  router: Router;
  metrics: GatewayMetrics;
  close(): Promise<void>;
}

export async function startGateway(
  config: GatewayConfig,
  options: GatewayOptions = {},
): Promise<GatewayHandle> {
  let fleet: EmbeddedFleet | null = null;
  let backendConfigs = config.backends;
  if (backendConfigs.length === 0) {
    fleet = await startEmbeddedFleet({
      replicas: config.embeddedReplicas,
      blockSize: config.blockSize,
      host: '127.0.0.1',
      ...(options.embeddedSpeedup !== undefined && { speedup: options.embeddedSpeedup }),
    });
    backendConfigs = fleet.backends;
  }
  try {
    return await wire(config, backendConfigs, fleet);
  } catch (err) {
    await fleet?.close();
    throw err;
  }
}

async function wire(
  config: GatewayConfig,
  backendConfigs: GatewayConfig['backends'],
  fleet: EmbeddedFleet | null,
): Promise<GatewayHandle> {
  const tokenizer = makePromptTokenizer(config.tokenizer, config.chatTemplate);
  const backends = makeBackends(backendConfigs);
  const byName = new Map(backends.map((b) => [b.name, b]));
  const byReplica = new Map(backends.map((b, i) => [i, b]));
  const router = new Router({
    replicas: backends.map((b) => b.name),
    policy: config.policy,
    indexMode: config.index,
    kvThreshold: config.kvThreshold,
    staleMs: config.staleMs,
    seed: config.seed,
  });
  const down = new Set<string>();
  const metrics = new GatewayMetrics({
    replicaLoads: () =>
      router.snapshot().replicas.map((r) => ({
        name: r.name,
        queuedPromptTokens: r.queuedPromptTokens,
        inFlight: r.inFlight,
        up: r.healthy,
      })),
  });

  let subscriber: EventSubscriber | null = null;
  const health = new HealthChecker(
    backends.map((b, replica) => ({ replica, url: b.config.url })),
    (replica) => {
      const b = byReplica.get(replica)!;
      down.delete(b.name);
      router.markUp(b.name);
      subscriber?.rebuild(replica);
    },
  );
  const markDown = (backend: Backend): void => {
    if (down.has(backend.name)) return;
    down.add(backend.name);
    router.markDown(backend.name);
    health.watch(backends.indexOf(backend));
  };
  const scraper = new MetricsScraper(
    backends.map((b, replica) => ({ replica, url: b.config.url })),
    {
      intervalMs: config.scrapeMs,
      isDown: (replica) => down.has(byReplica.get(replica)!.name),
      onReport: (replica, report, nowMs) =>
        router.onReport(byReplica.get(replica)!.name, report, nowMs),
      onUnreachable: (replica) => markDown(byReplica.get(replica)!),
    },
  );
  subscriber =
    config.index === 'events'
      ? new EventSubscriber(
          backends.flatMap((b, replica) =>
            b.config.events ? [{ replica, events: b.config.events, replay: b.config.replay }] : [],
          ),
          {
            onEvents: (replica, events, nowMs) =>
              router.applyForeignEvents(byReplica.get(replica)!.name, events, nowMs),
            onRestart: (replica) =>
              router.applyForeignEvents(
                byReplica.get(replica)!.name,
                [{ type: 'AllBlocksCleared' }],
                Date.now(),
              ),
          },
        )
      : null;

  let requestIds = 0;
  const generate: GenerateContext = {
    router,
    backends,
    byName,
    auth: new Authenticator(config.apiKeys, config.tenantSalts),
    tokenizer,
    metrics,
    blockSize: config.blockSize,
    bodyLimitBytes: config.bodyLimitBytes,
    maxRetries: config.maxRetries,
    markDown,
    nextRequestId: () => `gw-${++requestIds}`,
  };

  const replicaJson = () => {
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

  const GET = { method: 'GET' } as const;
  const POST = { method: 'POST' } as const;
  const routes = {
    '/v1/completions': POST,
    '/v1/chat/completions': POST,
    '/health': GET,
    '/v1/models': GET,
    '/metrics': GET,
    '/router/replicas': GET,
  };

  async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    findRoute(routes, req, res);
    const path = (req.url ?? '/').split('?')[0]!;
    switch (path) {
      case '/v1/completions':
        return handleGenerate(generate, 'completions', req, res);
      case '/v1/chat/completions':
        return handleGenerate(generate, 'chat', req, res);
      case '/health':
        res.writeHead(200, { 'content-length': 0 });
        res.end();
        return;
      case '/v1/models':
        generate.auth.authenticate(req.headers.authorization, undefined);
        return sendJson(res, 200, { object: 'list', data: await listModels(backends) });
      case '/metrics': {
        const text = await metrics.registry.metrics();
        res.writeHead(200, { 'content-type': metrics.registry.contentType });
        res.end(text);
        return;
      }
      case '/router/replicas':
        generate.auth.authenticate(req.headers.authorization, undefined);
        return sendJson(res, 200, replicaJson());
    }
  }

  const server: Server = createServer({ keepAlive: true }, (req, res) => {
    serve(req, res).catch((err: unknown) => sendError(res, toApiError(err)));
  });
  server.requestTimeout = REQUEST_TIMEOUT_MS;
  server.headersTimeout = HEADERS_TIMEOUT_MS;
  const { port, url } = await listen(server, config.port, config.host);
  scraper.start();
  subscriber?.start();

  let closed: Promise<void> | null = null;
  return {
    url,
    port,
    replicas: backends.map((b) => ({
      name: b.name,
      url: b.config.url,
      events: b.config.events,
      replay: b.config.replay,
      embedded: fleet !== null,
    })),
    router,
    metrics,
    close() {
      closed ??= (async () => {
        await closeServer(server);
        await Promise.allSettled([scraper.close(), health.close(), subscriber?.close()]);
        await closeBackends(backends);
        await fleet?.close();
      })();
      return closed;
    },
  };
}
