/**
 * `kvroute epp`: kvroute as the endpoint picker of the Gateway API inference extension (Envoy's
 * external processing gRPC protocol, `src/epp/`). It takes `serve`'s backend, config, events,
 * tokenizer, policy and admission options (the same reader, `readServeConfig`), plus the pool's
 * pods as `--pool-backends ip:port,...`; with no backend at all it starts an embedded simulated
 * fleet, as `serve` does. Its options: `options/epp.ts`.
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
import { type Flags, printHelp, readFlags, UsageError } from './args.ts';
import { policyLabel } from './llmdScorerFlags.ts';
import { EPP_OPTIONS } from './options/epp.ts';
import { helpOf } from './options/help.ts';
import { readerOf } from './options/read.ts';
import { specOf } from './options/spec.ts';
import { readServeConfig } from './serve.ts';
import { serveUntilSignal } from './untilSignal.ts';

const FLAGS = specOf(EPP_OPTIONS);

const HELP = `usage: kvroute epp [flags]

The endpoint picker (EPP) of the Gateway API inference extension: a gRPC server speaking
Envoy's external processing protocol (envoy.service.ext_proc.v3.ExternalProcessor, endpoint
picker protocol ${EPP_PROTOCOL_VERSION}). For each request it reads the body, asks kvroute's
router for the replica where the prompt adds the least prefill work and names it to the data
plane (header x-gateway-destination-endpoint and envoy.lb dynamic metadata); it follows the
response to release the router's ledger. The data plane forwards the bytes itself.

${helpOf(EPP_OPTIONS)}
The data plane: Envoy's ext_proc filter with processing_mode request_body_mode and
response_body_mode FULL_DUPLEX_STREAMED (or BUFFERED), header and trailer modes SEND, and an
ORIGINAL_DST cluster reading x-gateway-destination-endpoint (docs/kubernetes.md).
`;

/** `--pool-backends 10.0.0.5:8000,10.0.0.6:8000` (and the pool's event ports) as backends. */
export function readPoolBackends(flags: Flags): BackendConfig[] {
  const option = readerOf(EPP_OPTIONS, flags);
  const eventsPort = option('pool-events-port');
  const replayPort = option('pool-replay-port');
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
  const ms = readerOf(EPP_OPTIONS, flags);
  const D = DEFAULT_GRPC_LIMITS;
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
  const option = readerOf(EPP_OPTIONS, flags);
  const port = option('port') ?? DEFAULT_EPP_PORT;
  const healthPort = option('health-port') ?? DEFAULT_EPP_HEALTH_PORT;
  const metricsPort = option('metrics-port') ?? DEFAULT_EPP_METRICS_PORT;
  const speedup = option('speedup');
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
    `kvroute epp listening on ${epp.address} (ext_proc, endpoint picker protocol ${EPP_PROTOCOL_VERSION}; gRPC health on :${epp.port} and :${epp.healthPort}; metrics http://${config.host}:${epp.metricsPort}/metrics; policy ${policyLabel(config)}, index ${config.index})\n`,
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
