/**
 * `startEpp`: kvroute as the endpoint picker (EPP) of the Gateway API inference extension. A
 * gRPC server speaks Envoy's external processing protocol (`exchange.ts`, one stream per HTTP
 * request) over the gateway's model pools (`src/gateway/pools.ts`: backend watches, KV events,
 * tokenizers and routers, the same code as `kvroute serve`); the gRPC health service answers on
 * the ext_proc port and on a health port of its own (9003, as the reference endpoint picker),
 * and `/metrics` (with `/router/replicas` and `/health`) on an HTTP port (9090). Plaintext
 * HTTP/2 (h2c): the data plane's cluster for the picker must not ask for TLS.
 */
import { createServer, type Server as HttpServer } from 'node:http';
import {
  Server,
  ServerCredentials,
  type ServerDuplexStream,
  status as grpcStatus,
} from '@grpc/grpc-js';
import { GatewayAdmission } from '../gateway/admission.ts';
import { Authenticator } from '../gateway/auth.ts';
import type { GatewayConfig } from '../gateway/config.ts';
import { GatewayError } from '../gateway/errors.ts';
import { metricsOf, poolsOf } from '../gateway/gateway.ts';
import { type Logger, silentLogger } from '../gateway/log.ts';
import type { GatewayMetrics } from '../gateway/metrics.ts';
import type { ModelPools } from '../gateway/pools.ts';
import { closeServer, listen } from '../openai/http.ts';
import { EndpointBook } from './endpoints.ts';
import { Exchange } from './exchange.ts';
import { EppHealth } from './health.ts';
import type { ProcessingRequest, ProcessingResponse } from './messages.ts';
import { EppPicker } from './picker.ts';
import { EXT_PROC_SERVICE, HEALTH_SERVICE, serviceDefinition } from './protos.ts';

/** The reference endpoint picker's ports: ext_proc, gRPC health, metrics. */
export const DEFAULT_EPP_PORT = 9002;
export const DEFAULT_EPP_HEALTH_PORT = 9003;
export const DEFAULT_EPP_METRICS_PORT = 9090;
/** gRPC framing on top of the largest body a BUFFERED data plane sends in one message. */
const MESSAGE_OVERHEAD_BYTES = 64 * 1024;

export interface EppOptions {
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
  const pools = poolsOf(config, logger, () => lateMetrics);
  await pools.addConfigured(config.backends);
  const metrics = metricsOf(config, pools);
  lateMetrics = metrics;
  const endpoints = new EndpointBook();
  let ledgerIds = 0;
  const picker = new EppPicker({
    pools,
    auth: new Authenticator([], config.tenantSalts),
    admission: new GatewayAdmission(config.admission, (limit, tenant) =>
      metrics.recordRejection(limit, tenant),
    ),
    metrics,
    endpoints,
    blockSize: config.blockSize,
    nextLedgerId: () => `epp-${++ledgerIds}`,
  });
  const health = new EppHealth(() => pools.live().length > 0);
  const exchangeContext = { picker, metrics, logger, bodyLimitBytes: config.bodyLimitBytes };
  const maxMessageBytes = config.bodyLimitBytes + MESSAGE_OVERHEAD_BYTES;

  const servers: Server[] = [];
  let metricsServer: HttpServer | null = null;
  const close = async (): Promise<void> => {
    health.close();
    for (const s of servers) s.forceShutdown();
    if (metricsServer) await closeServer(metricsServer);
    await pools.close();
  };
  try {
    const main = new Server({
      'grpc.max_receive_message_length': maxMessageBytes,
      'grpc.max_send_message_length': maxMessageBytes,
    });
    servers.push(main);
    main.addService(serviceDefinition(EXT_PROC_SERVICE), {
      Process: (call: ServerDuplexStream<ProcessingRequest, ProcessingResponse>) =>
        serveExchange(call, new Exchange(exchangeContext, ioOf(call))),
    });
    main.addService(serviceDefinition(HEALTH_SERVICE), health.implementation());
    const port = await bind(main, host, options.port ?? DEFAULT_EPP_PORT);
    let healthPort: number | null = null;
    const healthOption =
      options.healthPort === undefined ? DEFAULT_EPP_HEALTH_PORT : options.healthPort;
    if (healthOption !== null) {
      const healthServer = new Server();
      servers.push(healthServer);
      healthServer.addService(serviceDefinition(HEALTH_SERVICE), health.implementation());
      healthPort = await bind(healthServer, host, healthOption);
    }
    let metricsPort: number | null = null;
    const metricsOption =
      options.metricsPort === undefined ? DEFAULT_EPP_METRICS_PORT : options.metricsPort;
    if (metricsOption !== null) {
      metricsServer = metricsHttp(metrics, pools);
      metricsPort = (await listen(metricsServer, metricsOption, host)).port;
    }
    pools.start();
    return {
      address: `${host.includes(':') ? `[${host}]` : host}:${port}`,
      port,
      healthPort,
      metricsPort,
      pools,
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

function bind(server: Server, host: string, port: number): Promise<number> {
  const address = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  return new Promise((resolve, reject) =>
    server.bindAsync(address, ServerCredentials.createInsecure(), (err, bound) =>
      err ? reject(err) : resolve(bound),
    ),
  );
}

/** `/metrics` (Prometheus), `/router/replicas` (the pools' state), `/health`. */
function metricsHttp(metrics: GatewayMetrics, pools: ModelPools): HttpServer {
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
    } else {
      res.writeHead(404).end();
    }
  });
}
