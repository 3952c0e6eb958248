/**
 * `kvroute epp`: kvroute as the endpoint picker of the Gateway API inference extension (Envoy's
 * external processing gRPC protocol, `src/epp/`). It takes `serve`'s backend, config, events,
 * tokenizer, policy and admission options (the same reader, `readServeConfig`), plus the pool's
 * pods as `--pool-backends ip:port,...`; with no backend at all it starts an embedded simulated
 * fleet, as `serve` does.
 */
import { parseBackendFlag } from '../serving/config.ts';
import type { BackendConfig } from '../serving/backendConfig.ts';
import { makeLogger } from '../serving/log.ts';
import { startEppWithFleet } from '../embedded/epp.ts';
import { hostPortOf, joinHostPort } from '../epp/endpoints.ts';
import { EPP_PROTOCOL_VERSION } from '../epp/messages.ts';
import {
  DEFAULT_EPP_HEALTH_PORT,
  DEFAULT_EPP_METRICS_PORT,
  DEFAULT_EPP_PORT,
  DEFAULT_GRPC_LIMITS,
  type GrpcLimits,
} from '../epp/server.ts';
import { type Flags, flagSpec, printHelp, readFlags, UsageError } from './args.ts';
import { FLOW_BOOLEAN_FLAGS, FLOW_FLAG_NAMES, FLOW_HELP } from './flowFlags.ts';
import { NATS_AUTH_HELP } from './natsFlags.ts';
import { NATS_BOUNDS_HELP, NATS_FLAG_NAMES, readServeConfig } from './serve.ts';
import { serveUntilSignal } from './untilSignal.ts';

const FLAGS = flagSpec({
  string:
    'port health-port metrics-port host config policy index tokenizer chat-template tokenize ' +
    'stale-ms kv-threshold scrape-ms block-size replicas speedup seed log-level max-queue-ms ' +
    'max-ttft-ms prefill-us-per-token pool-events-port pool-replay-port kv-events-bind ' +
    'grpc-idle-ms grpc-keepalive-ms grpc-keepalive-timeout-ms grpc-max-age-ms grpc-max-age-grace-ms ' +
    `nats cluster nats-heartbeat-ms nats-peer-timeout-ms ${NATS_FLAG_NAMES} ${FLOW_FLAG_NAMES}`,
  multiple: 'backend pool-backends',
  boolean: `expose-replica-addresses ${FLOW_BOOLEAN_FLAGS}`,
});

const D = DEFAULT_GRPC_LIMITS;
const HELP = `usage: kvroute epp [flags]

The endpoint picker (EPP) of the Gateway API inference extension: a gRPC server speaking
Envoy's external processing protocol (envoy.service.ext_proc.v3.ExternalProcessor, endpoint
picker protocol ${EPP_PROTOCOL_VERSION}). For each request it reads the body, asks kvroute's
router for the replica where the prompt adds the least prefill work and names it to the data
plane (header x-gateway-destination-endpoint and envoy.lb dynamic metadata); it follows the
response to release the router's ledger. The data plane forwards the bytes itself.

  --port N               ext_proc port, plaintext HTTP/2; 0 picks a free one (default ${DEFAULT_EPP_PORT})
  --health-port N        gRPC health service (also served on --port) (default ${DEFAULT_EPP_HEALTH_PORT})
  --metrics-port N       /metrics, /router/replicas, /health over HTTP (default ${DEFAULT_EPP_METRICS_PORT})
  --host H               interface of all three (default 127.0.0.1; 0.0.0.0 in a pod)
  --pool-backends LIST   the pool's endpoints: ip:port (or URLs) separated by commas,
                         repeatable; each is a backend at http://ip:port
  --pool-events-port N   KV events of every pool backend at tcp://ip:N (vLLM's publisher)
  --pool-replay-port N   and their replay at tcp://ip:N
  --kv-events-bind EP    or bind one SUB socket (tcp://*:5557) that every pod's publisher
                         connects to, pods told apart by topic kv@<pod-ip>@<model> (llm-d's
                         deployment; kvroute serve --help)
  --backend SPEC         a backend as kvroute serve takes it: URL[,events=tcp://H:P]
                         [,replay=tcp://H:P][,model=NAME][,api-key=KEY]; repeatable;
                         [,kv-offloading-size=GiB | ,cpu-kv-blocks=N][,kv-blocks=N]: its
                         CPU tier and GPU pool for --index approx (kvroute serve --help)
  --config FILE          kvroute serve's YAML config: backends, policy, tokenizer, tenants
                         and admission; its port and host keys are the gateway's, not used
  --expose-replica-addresses  x-kvroute-replica gives the replica's ip:port (default: a
                         label, replica-0, replica-1, ...; docs/security.md)
connection limits of the gRPC ports (grpc-js options; Envoy reconnects on its next request)
  --grpc-idle-ms N       close a connection with no stream for N ms, one that only sent the
                         HTTP/2 preface included (grpc.max_connection_idle_ms, default ${D.idleMs})
  --grpc-keepalive-ms N  ping an idle peer every N ms (grpc.keepalive_time_ms, default ${D.keepaliveMs})
  --grpc-keepalive-timeout-ms N  close it when a ping is not answered within N ms
                         (grpc.keepalive_timeout_ms, default ${D.keepaliveTimeoutMs})
  --grpc-max-age-ms N    close a connection N ms old once its streams end (grpc.max_connection_age_ms,
                         default: no limit), forcibly --grpc-max-age-grace-ms N later (default: none)
serve's routing flags, same meaning and defaults (kvroute serve --help):
  --policy --index --tokenizer --chat-template --tokenize --stale-ms --kv-threshold
  --scrape-ms --block-size --seed --log-level --max-queue-ms --max-ttft-ms
  --prefill-us-per-token
  --replicas N --speedup F   the embedded simulated fleet, when no backend is given
  --nats URL [--cluster NAME] [--nats-heartbeat-ms N] [--nats-peer-timeout-ms N]
                         share routing state over NATS with the cluster's other pickers and
                         gateways (as kvroute serve --nats): active-active pickers
${NATS_AUTH_HELP}${NATS_BOUNDS_HELP}${FLOW_HELP.replace('wait in the gateway', 'wait in the picker').replace('request waits here', 'request waits here, before its pick')}
The data plane: Envoy's ext_proc filter with processing_mode request_body_mode and
response_body_mode FULL_DUPLEX_STREAMED (or BUFFERED), header and trailer modes SEND, and an
ORIGINAL_DST cluster reading x-gateway-destination-endpoint (docs/kubernetes.md).
`;

/** `--pool-backends 10.0.0.5:8000,10.0.0.6:8000` (and the pool's event ports) as backends. */
export function readPoolBackends(flags: Flags): BackendConfig[] {
  const eventsPort = flags.number('pool-events-port', { min: 1, max: 65535, integer: true });
  const replayPort = flags.number('pool-replay-port', { min: 1, max: 65535, integer: true });
  const entries = flags
    .strings('pool-backends')
    .flatMap((v) => v.split(','))
    .map((v) => v.trim());
  if (entries.some((e) => e === '')) {
    throw new UsageError('--pool-backends takes ip:port entries separated by commas');
  }
  if (entries.length === 0 && (eventsPort !== undefined || replayPort !== undefined)) {
    throw new UsageError('--pool-events-port and --pool-replay-port need --pool-backends');
  }
  return entries.map((entry) => {
    const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(entry)?.[1];
    if (scheme !== undefined && scheme !== 'http' && scheme !== 'https') {
      throw new UsageError(`--pool-backends takes ip:port or http(s) URLs; got '${entry}'`);
    }
    const backend = parseBackendFlag(scheme ? entry : `http://${entry}`, '--pool-backends');
    const { host } = hostPortOf(backend.url);
    const at = (port: number | undefined) =>
      port === undefined ? null : `tcp://${joinHostPort(host, port)}`;
    return { ...backend, events: at(eventsPort), replay: at(replayPort) };
  });
}

/** The gRPC ports' connection limits, each flag a whole number of ms >= 1. */
export function readGrpcLimits(flags: Flags): GrpcLimits {
  const ms = (name: string) => flags.positive(name, true);
  return {
    idleMs: ms('grpc-idle-ms') ?? D.idleMs,
    keepaliveMs: ms('grpc-keepalive-ms') ?? D.keepaliveMs,
    keepaliveTimeoutMs: ms('grpc-keepalive-timeout-ms') ?? D.keepaliveTimeoutMs,
    maxAgeMs: ms('grpc-max-age-ms') ?? D.maxAgeMs,
    maxAgeGraceMs: ms('grpc-max-age-grace-ms') ?? D.maxAgeGraceMs,
  };
}

export async function run(argv: string[]): Promise<number> {
  const flags = readFlags(argv, FLAGS);
  if (flags === 'help') return printHelp(HELP);
  let config = readServeConfig(flags);
  const pool = readPoolBackends(flags);
  if (pool.length > 0) {
    const given = flags.strings('backend').length > 0 ? config.backends : [];
    config = { ...config, backends: [...given, ...pool] };
  }
  const port = flags.number('port', { min: 0, max: 65535, integer: true }) ?? DEFAULT_EPP_PORT;
  const healthPort =
    flags.number('health-port', { min: 0, max: 65535, integer: true }) ?? DEFAULT_EPP_HEALTH_PORT;
  const metricsPort =
    flags.number('metrics-port', { min: 0, max: 65535, integer: true }) ?? DEFAULT_EPP_METRICS_PORT;
  const speedup = flags.positive('speedup');
  const grpc = readGrpcLimits(flags);
  const logger = makeLogger({ level: config.logLevel });
  const epp = await startEppWithFleet(config, {
    port,
    healthPort,
    metricsPort,
    logger,
    grpc,
    ...(speedup !== undefined && { embeddedSpeedup: speedup }),
  });
  const out = process.stdout;
  out.write(
    `kvroute epp listening on ${epp.address} (ext_proc, endpoint picker protocol ${EPP_PROTOCOL_VERSION}; gRPC health on :${epp.port} and :${epp.healthPort}; metrics http://${config.host}:${epp.metricsPort}/metrics; policy ${config.policy}, index ${config.index})\n`,
  );
  out.write(`endpoints${epp.fleet ? ' (embedded simulated engines)' : ''}:\n`);
  for (const r of await epp.replicas()) {
    out.write(`  ${(r.endpoint ?? '(not resolved)').padEnd(22)} ${r.url}\n`);
  }
  if (config.apiKeys.length > 0) {
    logger.warn(
      { keys: config.apiKeys.length },
      'kvroute epp does not authenticate (the Gateway does): the api-keys are not checked; tenants come from the x-kvroute-tenant header',
    );
  }
  logger.info({ address: epp.address, policy: config.policy }, 'endpoint picker started');
  return serveUntilSignal(() => epp.close());
}
