/**
 * `startGateway`: wires the router core to the outside world. The HTTP edge (this file) answers
 * the gateway's own endpoints and turns errors into OpenAI JSON; the generate path, the metrics
 * scraper, the health checker and the KV event subscriber each live in a file of their own and
 * talk to the router only through its facade, with the wall clock read here.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Router } from '../router/index.ts';
import { Authenticator } from './auth.ts';
import { type Backend, closeBackends, listModels, makeBackends } from './backends.ts';
import type { GatewayConfig } from './config.ts';
import { GatewayError, toErrorResponse } from './errors.ts';
import { type EmbeddedFleet, startEmbeddedFleet } from './fleet.ts';
import { type GenerateContext, handleGenerate } from './generate.ts';
import { HealthChecker } from './health.ts';
import { GatewayMetrics } from './metrics.ts';
import { MetricsScraper } from './scraper.ts';
import { EventSubscriber } from './subscriber.ts';
import { makePromptTokenizer } from './tokenize.ts';

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

  async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0]!;
    const method = req.method ?? 'GET';
    if (path === '/v1/completions' || path === '/v1/chat/completions') {
      if (method !== 'POST') throw methodNotAllowed(res, 'POST', method, path);
      return handleGenerate(
        generate,
        path === '/v1/completions' ? 'completions' : 'chat',
        req,
        res,
      );
    }
    if (method !== 'GET' && method !== 'HEAD') {
      if (['/health', '/v1/models', '/metrics', '/router/replicas'].includes(path)) {
        throw methodNotAllowed(res, 'GET', method, path);
      }
      throw new GatewayError('ERR_NOT_FOUND', `no route for ${method} ${path}`);
    }
    switch (path) {
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
      default:
        throw new GatewayError('ERR_NOT_FOUND', `no route for ${method} ${path}`);
    }
  }

  const server: Server = createServer({ keepAlive: true }, (req, res) => {
    serve(req, res).catch((err: unknown) => sendError(res, err));
  });
  server.requestTimeout = REQUEST_TIMEOUT_MS;
  server.headersTimeout = HEADERS_TIMEOUT_MS;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  scraper.start();
  subscriber?.start();

  const port = (server.address() as AddressInfo).port;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  let closed: Promise<void> | null = null;
  return {
    url: `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`,
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
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeAllConnections();
        await stopped;
        await Promise.allSettled([scraper.close(), health.close(), subscriber?.close()]);
        await closeBackends(backends);
        await fleet?.close();
      })();
      return closed;
    },
  };
}

function methodNotAllowed(
  res: ServerResponse,
  allow: string,
  method: string,
  path: string,
): GatewayError {
  res.setHeader('allow', allow);
  return new GatewayError('ERR_METHOD_NOT_ALLOWED', `${method} is not allowed on ${path}`);
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  });
  res.end(text);
}

function sendError(res: ServerResponse, err: unknown): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const { status, headers, body } = toErrorResponse(err);
  // The rest of a refused body is not worth reading: close rather than drain it.
  if (status === 413) headers.connection = 'close';
  res.writeHead(status, { ...headers, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
