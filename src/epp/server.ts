/**
 * `startEpp`: kvroute as the endpoint picker (EPP) of the Gateway API inference extension. A
 * gRPC server speaks Envoy's external processing protocol (`exchange.ts`, one stream per HTTP
 * request) over the gateway's model pools (`src/serving/pools.ts`: backend watches, KV events,
 * tokenizers and routers, the same code as `kvroute serve`); the gRPC health service answers on
 * the ext_proc port and on a health port of its own (9003, as the reference endpoint picker),
 * and `/metrics` (with `/router/replicas`, `/health` and, with `--planner`, the online planner's
 * `/planner/desired`) on an HTTP port (9090). Plaintext HTTP/2 (h2c): the data plane's cluster
 * for the picker must not ask for TLS.
 */
import { createServer, type Server as HttpServer } from 'node:http';
import {
  Server,
  ServerCredentials,
  type ServerDuplexStream,
  type ServiceDefinition,
  status as grpcStatus,
} from '@grpc/grpc-js';
import { GatewayAdmission } from '../serving/admission.ts';
import { Authenticator } from '../serving/auth.ts';
import { backendNames } from '../serving/backends.ts';
import type { GatewayConfig } from '../serving/config.ts';
import { GatewayError } from '../serving/errors.ts';
import type { FlowControl } from '../serving/flowControl.ts';
import { centralEventsOf, flowControlOf, metricsOf, plannerOf } from '../serving/fromConfig.ts';
import { type Logger, silentLogger } from '../serving/log.ts';
import type { GatewayMetrics } from '../serving/metrics.ts';
import { type GatewayPlanner, sharePlannerOver } from '../serving/planner.ts';
import type { ModelPools } from '../serving/pools.ts';
import { ReplicaLabels } from '../serving/replicaLabels.ts';
import { closeServer, listen } from '../openai/http.ts';
import type { StateSync } from '../sync/stateSync.ts';
import { EndpointBook } from './endpoints.ts';
import { Exchange, type ExchangeContext } from './exchange.ts';
import { EppHealth } from './health.ts';
import type { ProcessingRequest, ProcessingResponse } from './messages.ts';
import { EppPicker } from './picker.ts';
import { EXT_PROC_SERVICE, HEALTH_SERVICE, serviceDefinition } from './protos.ts';
import { syncedPools } from './sync.ts';
import { encodeProcessingResponse } from './wire.ts';
import { decodeProcessingRequest } from './wireIn.ts';

/** The reference endpoint picker's ports: ext_proc, gRPC health, metrics. */
export const DEFAULT_EPP_PORT = 9002;
export const DEFAULT_EPP_HEALTH_PORT = 9003;
export const DEFAULT_EPP_METRICS_PORT = 9090;
/** gRPC framing on top of the largest body a BUFFERED data plane sends in one message. */
const MESSAGE_OVERHEAD_BYTES = 64 * 1024;

/**
 * Connection limits of the gRPC ports (grpc-js server options). A connection with no stream
 * open for `idleMs` is closed (GOAWAY), whether it ever sent a request or only the HTTP/2
 * preface; the server pings every `keepaliveMs` and closes a connection whose peer does not
 * answer within `keepaliveTimeoutMs` (one that sends nothing at all); a connection older than
 * `maxAgeMs` is closed once its streams end, or `maxAgeGraceMs` later. Envoy reconnects to the
 * picker on its next request, so closing an idle connection costs one handshake.
 */
export interface GrpcLimits {
  /** `grpc.max_connection_idle_ms` */
  idleMs: number;
  /** `grpc.keepalive_time_ms` */
  keepaliveMs: number;
  /** `grpc.keepalive_timeout_ms` */
  keepaliveTimeoutMs: number;
  /** `grpc.max_connection_age_ms`; null: no limit (gRPC's default). */
  maxAgeMs: number | null;
  /** `grpc.max_connection_age_grace_ms`; null: no limit. */
  maxAgeGraceMs: number | null;
}

export const DEFAULT_GRPC_LIMITS: GrpcLimits = {
  idleMs: 60_000,
  keepaliveMs: 30_000,
  keepaliveTimeoutMs: 10_000,
  maxAgeMs: null,
  maxAgeGraceMs: null,
};

/** The grpc-js channel options of `limits`. */
export function grpcServerOptions(limits: GrpcLimits): Record<string, number> {
  return {
    'grpc.max_connection_idle_ms': limits.idleMs,
    'grpc.keepalive_time_ms': limits.keepaliveMs,
    'grpc.keepalive_timeout_ms': limits.keepaliveTimeoutMs,
    ...(limits.maxAgeMs !== null && { 'grpc.max_connection_age_ms': limits.maxAgeMs }),
    ...(limits.maxAgeGraceMs !== null && {
      'grpc.max_connection_age_grace_ms': limits.maxAgeGraceMs,
    }),
  };
}

export interface EppOptions {
  /** Idle, keepalive and age limits of the gRPC ports (default DEFAULT_GRPC_LIMITS). */
  grpc?: Partial<GrpcLimits>;
  host?: string;
  /** ext_proc (and health) port; 0 picks a free one (default 9002). */
  port?: number;
  /** The health service's own port; null: only on the ext_proc port (default 9003). */
  healthPort?: number | null;
  /** `/metrics` port; null: none (default 9090). */
  metricsPort?: number | null;
  logger?: Logger;
}

export interface EppReplica {
  name: string;
  url: string;
  /** `ip:port` as the picker names it, null while its host has not resolved. */
  endpoint: string | null;
}

export interface EppHandle {
  /** `host:port` of the ext_proc server. */
  address: string;
  port: number;
  healthPort: number | null;
  metricsPort: number | null;
  pools: ModelPools;
  /** The routing state shared over NATS (`--nats`), or null. */
  sync: StateSync | null;
  /** The online planner (`--planner`), or null. */
  planner: GatewayPlanner | null;
  metrics: GatewayMetrics;
  health: EppHealth;
  replicas(): Promise<EppReplica[]>;
  close(): Promise<void>;
}

export async function startEpp(
  config: GatewayConfig,
  options: EppOptions = {},
): Promise<EppHandle> {
  const logger = options.logger ?? silentLogger();
  const host = options.host ?? config.host;
  if (config.backends.length === 0) {
    throw new GatewayError('ERR_CONFIG', 'no backend configured', { param: 'backends' });
  }
  let lateMetrics: GatewayMetrics | null = null;
  const { pools, sync } = syncedPools(
    config,
    logger,
    () => lateMetrics,
    await centralEventsOf(config, logger),
  );
  await pools.addConfigured(config.backends);
  const metrics = metricsOf(config, pools);
  if (sync !== null) metrics.followSync(() => sync.stats());
  lateMetrics = metrics;
  const endpoints = new EndpointBook();
  const flow = flowControlOf(config, metrics);
  const planner = plannerOf(config, metrics, logger);
  if (planner && sync) sharePlannerOver(planner, sync);
  const picker = eppPickerOf(config, pools, metrics, endpoints, flow, planner);
  const health = new EppHealth(() => pools.live().length > 0);
  // The configured backends are labelled in their order, as the gateway labels them.
  const labels = ReplicaLabels.inOrder(
    config.exposeReplicaAddresses,
    backendNames(config.backends),
  );
  const exchangeContext = {
    picker,
    metrics,
    logger,
    bodyLimitBytes: config.bodyLimitBytes,
    labels,
  };

  const running: EppServers = { grpc: [], metrics: null };
  const close = async (): Promise<void> => {
    flow?.close();
    await planner?.close();
    health.close();
    for (const s of running.grpc) s.forceShutdown();
    if (running.metrics) await closeServer(running.metrics);
    await sync?.close();
    await pools.close();
  };
  try {
    const ports = await bindEpp(running, host, options, exchangeContext, health, {
      metrics,
      pools,
      planner,
    });
    pools.start();
    planner?.start();
    return {
      address: `${host.includes(':') ? `[${host}]` : host}:${ports.port}`,
      ...ports,
      pools,
      sync,
      planner,
      metrics,
      health,
      replicas: () =>
        Promise.all(
          pools.backends().map(async (b) => ({
            name: b.name,
            url: b.url,
            endpoint: await endpoints.resolve(b.url),
          })),
        ),
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

function eppPickerOf(
  config: GatewayConfig,
  pools: ModelPools,
  metrics: GatewayMetrics,
  endpoints: EndpointBook,
  flow: FlowControl | null,
  planner: GatewayPlanner | null,
): EppPicker {
  let ledgerIds = 0;
  return new EppPicker({
    pools,
    auth: new Authenticator([], config.tenantSalts),
    admission: new GatewayAdmission(config.admission, (limit, tenant) =>
      metrics.recordRejection(limit, tenant),
    ),
    flow,
    planner,
    metrics,
    endpoints,
    blockSize: config.blockSize,
    nextLedgerId: () => `epp-${++ledgerIds}`,
  });
}

/** The servers an endpoint picker runs; each is in here from the moment it is made. */
interface EppServers {
  grpc: Server[];
  metrics: HttpServer | null;
}

/** Binds the ext-proc server, then the health and metrics servers unless they are off (null). */
async function bindEpp(
  running: EppServers,
  host: string,
  options: EppOptions,
  exchangeContext: ExchangeContext,
  health: EppHealth,
  http: MetricsHttpContext,
): Promise<{ port: number; healthPort: number | null; metricsPort: number | null }> {
  const maxMessageBytes = exchangeContext.bodyLimitBytes + MESSAGE_OVERHEAD_BYTES;
  const limits = grpcServerOptions({ ...DEFAULT_GRPC_LIMITS, ...options.grpc });
  const main = new Server({
    ...limits,
    'grpc.max_receive_message_length': maxMessageBytes,
    'grpc.max_send_message_length': maxMessageBytes,
  });
  running.grpc.push(main);
  main.addService(extProcDefinition(), {
    Process: (call: ServerDuplexStream<ProcessingRequest, ProcessingResponse>) =>
      serveExchange(call, new Exchange(exchangeContext, ioOf(call))),
  });
  main.addService(serviceDefinition(HEALTH_SERVICE), health.implementation());
  const port = await bind(main, host, options.port ?? DEFAULT_EPP_PORT);
  let healthPort: number | null = null;
  const healthOption =
    options.healthPort === undefined ? DEFAULT_EPP_HEALTH_PORT : options.healthPort;
  if (healthOption !== null) {
    const healthServer = new Server(limits);
    running.grpc.push(healthServer);
    healthServer.addService(serviceDefinition(HEALTH_SERVICE), health.implementation());
    healthPort = await bind(healthServer, host, healthOption);
  }
  let metricsPort: number | null = null;
  const metricsOption =
    options.metricsPort === undefined ? DEFAULT_EPP_METRICS_PORT : options.metricsPort;
  if (metricsOption !== null) {
    running.metrics = metricsHttp(http);
    metricsPort = (await listen(running.metrics, metricsOption, host)).port;
  }
  return { port, healthPort, metricsPort };
}

/** Feeds a stream's messages to its exchange one at a time; ends it however the stream ends. */
function serveExchange(
  call: ServerDuplexStream<ProcessingRequest, ProcessingResponse>,
  exchange: Exchange,
): void {
  let queue = Promise.resolve();
  const then = (step: () => void | Promise<void>): void => {
    queue = queue.then(step).catch((err) => exchange.crash(err));
  };
  call.on('data', (req: ProcessingRequest) => then(() => exchange.handle(req)));
  call.on('end', () => then(() => exchange.endOfInput()));
  // A cancel is not queued: the ledger is released at once, even mid-pick.
  call.on('cancelled', () => exchange.cancel());
  call.on('error', () => exchange.cancel());
}

function ioOf(call: ServerDuplexStream<ProcessingRequest, ProcessingResponse>) {
  const open = () => !call.cancelled && !call.writableEnded;
  return {
    send: (response: ProcessingResponse) => {
      if (open()) call.write(response);
    },
    end: () => {
      if (open()) call.end();
    },
    fail: (code: 'UNIMPLEMENTED' | 'INTERNAL', message: string) => {
      if (open()) call.emit('error', { code: grpcStatus[code], details: message });
    },
  };
}

/**
 * The ext_proc service with the picker's own request decoder (`wireIn.ts`) and response encoder
 * (`wire.ts`) in proto-loader's place.
 */
function extProcDefinition(): ServiceDefinition {
  const definition = serviceDefinition(EXT_PROC_SERVICE);
  const process = definition.Process!;
  return {
    Process: {
      ...process,
      requestDeserialize: decodeProcessingRequest,
      responseSerialize: encodeProcessingResponse,
    },
  };
}

function bind(server: Server, host: string, port: number): Promise<number> {
  const address = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  return new Promise((resolve, reject) =>
    server.bindAsync(address, ServerCredentials.createInsecure(), (err, bound) =>
      err ? reject(err) : resolve(bound),
    ),
  );
}

/** What the metrics port serves from. */
interface MetricsHttpContext {
  metrics: GatewayMetrics;
  pools: ModelPools;
  planner: GatewayPlanner | null;
}

/**
 * `/metrics` (Prometheus), `/router/replicas` (the pools' state), `/health`, and with
 * `--planner` `/planner/desired` (KEDA's metrics-api scaler reads it here, as on the gateway).
 */
function metricsHttp({ metrics, pools, planner }: MetricsHttpContext): HttpServer {
  return createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET') {
      res.writeHead(405, { allow: 'GET' }).end();
    } else if (path === '/metrics') {
      metrics.registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
        () => res.writeHead(500).end(),
      );
    } else if (path === '/router/replicas') {
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify(pools.snapshot(Date.now())));
    } else if (path === '/health') {
      res.writeHead(200).end();
    } else if (path === '/planner/desired' && planner !== null) {
      planner.handle(req, res);
    } else {
      res.writeHead(404).end();
    }
  });
}
