/**
 * `kvroute serve`: the KV-aware OpenAI-compatible gateway. With no backend it starts an embedded
 * fleet of simulated engines and routes to them (that is `npm start`). Flags override the YAML
 * config file; every bad value is one line naming the flag (exit 2). The config file is read
 * again on SIGHUP and when it changes; a bad one logs one error and the running config stays.
 */
import { accessSync, statSync } from 'node:fs';
import { startGatewayWithFleet } from '../embedded/gateway.ts';
import {
  DEFAULT_EMBEDDED_REPLICAS,
  defaultConfig,
  defaultSessionAffinity,
  type GatewayConfig,
  headerName,
  loadConfigFile,
  parseApiKeyFlag,
  parseBackendFlag,
  PLAIN_FIELDS,
  PLANNER_FIELDS,
  readServeFields,
  SESSION_FIELDS,
  type SessionAffinityConfig,
} from '../serving/config.ts';
import { type Logger, makeLogger } from '../serving/log.ts';
import { defaultPlannerConfig, type PlannerConfig } from '../serving/planner.ts';
import { watchConfigFile } from '../gateway/reload.ts';
import { isPolicyName, POLICY_NAMES } from '../router/index.ts';
import { DEFAULT_MAX_DISCOVERED_BACKENDS, patternError } from '../sync/discoveryPolicy.ts';
import {
  DEFAULT_HEARTBEAT_MS,
  DEFAULT_PEER_TIMEOUT_MS,
  DEFAULT_STATE_EVERY_MS,
  type SyncConfig,
} from '../sync/stateSync.ts';
import { DEFAULT_CLUSTER, isClusterName } from '../sync/subjects.ts';
import { type Flags, printHelp, readFlags, UsageError } from './args.ts';
import { readFlowFlags } from './flowFlags.ts';
import { policyLabel, readServeScorerFlags } from './llmdScorerFlags.ts';
import { readNatsAuth } from './natsFlags.ts';
import { helpOf } from './options/help.ts';
import type { FieldRows, FieldValues } from './options/fields.ts';
import { type OptionReader, readerOf } from './options/read.ts';
import { SERVE_OPTIONS } from './options/serve.ts';
import { specOf } from './options/spec.ts';
import { readRuntimeFlags } from './runtimeFlags.ts';
import { serveUntilSignal } from './untilSignal.ts';
import { definedFields } from '../util/definedFields.ts';

const HELP = `usage: kvroute serve [flags]

A KV-cache-aware OpenAI-compatible gateway: tokenizes each request, asks the router for the
replica where it adds the least prefill work, and proxies the response back unchanged.
With no --backend (and none in --config) it starts ${DEFAULT_EMBEDDED_REPLICAS} simulated engines in this process.

${helpOf(SERVE_OPTIONS)}`;

/** Flags over the config file over the defaults. */
export function readServeConfig(flags: Flags, path = flags.string('config')): GatewayConfig {
  const base = path === undefined ? defaultConfig() : loadConfigFile(path);
  const option = readerOf(SERVE_OPTIONS, flags);
  checkPathFlags(option);
  let config: GatewayConfig = { ...base, ...readServeFields(option, PLAIN_FIELDS) };
  const set = <K extends keyof GatewayConfig>(
    key: K,
    value: GatewayConfig[K] | undefined,
  ): void => {
    if (value !== undefined) config = { ...config, [key]: value };
  };
  set('kvEventsBind', option('kv-events-bind'));
  set('policy', option('policy'));
  if (!isPolicyName(config.policy)) {
    throw new UsageError(
      `config: policy must be one of ${POLICY_NAMES.join(', ')}; got '${config.policy}'`,
    );
  }
  set(
    'backends',
    option('backend')?.map((b) => parseBackendFlag(b)),
  );
  set('apiKeys', option('api-key')?.map(parseApiKeyFlag));
  if (config.headersTimeoutMs > config.requestTimeoutMs) {
    throw new UsageError(
      `--headers-timeout-ms (${config.headersTimeoutMs}) must not exceed --request-timeout-ms (${config.requestTimeoutMs})`,
    );
  }
  set('sessionAffinity', readSessionFlags(option, config.sessionAffinity));
  set('planner', readPlannerFlags(option, config.planner));
  set('admission', readAdmissionFlags(option, config.admission));
  set('flowControl', readFlowFlags(flags, config.flowControl));
  set('nats', readNatsFlags(flags, option, config.nats));
  set('decodeCost', readDecodeCostFlags(option, config.decodeCost));
  const scorers = readServeScorerFlags(
    { weights: option('scorer-weights'), prefixCache: option('prefix-cache-scorer') },
    config,
  );
  return { ...config, ...scorers };
}

/** --kv-events-bind and --tokenizer, checked before anything is set: a ZMQ endpoint, a folder. */
function checkPathFlags(option: ServeOption): void {
  const bind = option('kv-events-bind');
  if (bind !== undefined && !/^(tcp|ipc|inproc):\/\/.+/.test(bind)) {
    throw new UsageError(
      `--kv-events-bind must be a ZMQ endpoint such as tcp://*:5557, got '${bind}'`,
    );
  }
  const tokenizer = option('tokenizer');
  if (tokenizer !== undefined && tokenizer !== 'builtin') readable(tokenizer, '--tokenizer');
}

/** --max-queue-ms, --max-ttft-ms and --prefill-us-per-token over the config file's admission. */
function readAdmissionFlags(
  option: ServeOption,
  current: GatewayConfig['admission'],
): GatewayConfig['admission'] | undefined {
  const maxQueueMs = option('max-queue-ms');
  const maxTtftMs = option('max-ttft-ms');
  const prefillUs = option('prefill-us-per-token');
  if (maxQueueMs === undefined && maxTtftMs === undefined && prefillUs === undefined) {
    return undefined;
  }
  return {
    ...current,
    ...(maxQueueMs !== undefined && { maxQueueMs }),
    ...(maxTtftMs !== undefined && { maxTtftMs }),
    ...(prefillUs !== undefined && { prefillUsPerToken: prefillUs }),
  };
}

/** --decode-cost-tokens and --engine-budget over the config file's decode term. */
function readDecodeCostFlags(
  option: ServeOption,
  current: GatewayConfig['decodeCost'],
): GatewayConfig['decodeCost'] {
  const decodeCost = option('decode-cost-tokens');
  const engineBudget = option('engine-budget');
  if (engineBudget !== undefined && decodeCost === undefined && current === undefined) {
    throw new UsageError('--engine-budget needs --decode-cost-tokens C');
  }
  if (decodeCost === undefined && engineBudget === undefined) return undefined;
  const tokens = decodeCost ?? current!.tokens;
  const budgetTokens = engineBudget ?? current?.budgetTokens;
  return { tokens, ...(budgetTokens !== undefined && { budgetTokens }) };
}

type ServeOption = OptionReader<typeof SERVE_OPTIONS>;

/**
 * A group of flags that turn a feature on, its switch or any of its fields: the fields given,
 * or null when none of the group is.
 */
function flagGroup<F extends FieldRows<typeof SERVE_OPTIONS>>(
  option: ServeOption,
  on: 'planner' | 'session-affinity',
  fields: F,
): FieldValues<typeof SERVE_OPTIONS, F> | null {
  const given = readServeFields(option, fields);
  return option(on) || Object.keys(given).length > 0 ? given : null;
}

/** A feature's flags over its config (null: off). */
type FlagGroupReader<C> = (option: ServeOption, current: C | null) => C | null;

/** --planner and its companions; any of them turns the planner on. */
const readPlannerFlags: FlagGroupReader<PlannerConfig> = (option, current) => {
  const given = flagGroup(option, 'planner', PLANNER_FIELDS);
  if (given === null) return current;
  if (given.profile !== undefined) {
    try {
      accessSync(given.profile);
    } catch {
      throw new UsageError(`--planner-profile: cannot read '${given.profile}'`);
    }
  }
  const c = current ?? defaultPlannerConfig();
  const { sloTtftP99Ms, sloTtftSlowdown: slowdown } = given;
  const ttft = sloTtftP99Ms ?? (slowdown === undefined ? c.sloTtftP99Ms : null);
  const relative = slowdown ?? (sloTtftP99Ms === undefined ? c.sloTtftSlowdown : null);
  if (ttft !== null && relative !== null) {
    throw new UsageError(
      '--planner-slo-ttft-p99-ms and --planner-slo-ttft-slowdown are alternative TTFT targets; give one',
    );
  }
  return { ...c, ...given, sloTtftP99Ms: ttft, sloTtftSlowdown: relative };
};

/** --session-affinity and its companions; any of them turns affinity on. */
const readSessionFlags: FlagGroupReader<SessionAffinityConfig> = (option, current) => {
  const given = flagGroup(option, 'session-affinity', SESSION_FIELDS);
  if (given === null) return current;
  const base = current ?? defaultSessionAffinity();
  let header = base.header;
  if (given.header !== undefined) {
    try {
      header = headerName(given.header, 'session-header');
    } catch {
      throw new UsageError(`--session-header: '${given.header}' is not an HTTP header name`);
    }
  }
  return { ...base, ...given, header };
};

/** --nats and its companions; the others without --nats are an error (they would do nothing). */
function readNatsFlags(
  flags: Flags,
  option: ServeOption,
  current: SyncConfig | null,
): SyncConfig | null {
  const url = option('nats');
  const cluster = option('cluster');
  const heartbeatMs = option('nats-heartbeat-ms');
  const peerTimeoutMs = option('nats-peer-timeout-ms');
  const auth = readNatsAuth(flags);
  const maxPeers = option('nats-max-peers');
  const maxEntriesPerPeer = option('nats-max-peer-entries');
  const maxMessageBytes = option('nats-max-message-bytes');
  const allow = option('discovery-allow');
  const maxBackends = option('discovery-max-backends');
  if (url === undefined) {
    const stray = [
      cluster !== undefined && '--cluster',
      heartbeatMs !== undefined && '--nats-heartbeat-ms',
      peerTimeoutMs !== undefined && '--nats-peer-timeout-ms',
      auth !== null && 'a NATS credential or TLS flag',
      maxPeers !== undefined && '--nats-max-peers',
      maxEntriesPerPeer !== undefined && '--nats-max-peer-entries',
      maxMessageBytes !== undefined && '--nats-max-message-bytes',
      allow !== undefined && '--discovery-allow',
      maxBackends !== undefined && '--discovery-max-backends',
    ].find(Boolean);
    if (stray) throw new UsageError(`${stray} needs --nats URL`);
    return current;
  }
  if (!/^(nats|tls|wss?):\/\/[^/]+/.test(url.split(',')[0]!)) {
    throw new UsageError(
      `--nats must be nats://HOST:PORT (comma-separated for several), got '${url}'`,
    );
  }
  if (cluster !== undefined && !isClusterName(cluster)) {
    throw new UsageError(`--cluster takes letters, digits, - and _, got '${cluster}'`);
  }
  const hb = heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
  const timeout = peerTimeoutMs ?? Math.max(DEFAULT_PEER_TIMEOUT_MS, 3 * hb);
  if (timeout <= hb) {
    throw new UsageError(
      `--nats-peer-timeout-ms (${timeout}) must exceed --nats-heartbeat-ms (${hb})`,
    );
  }
  const patterns = allow === undefined ? [] : allow.split(',').map((p) => p.trim());
  for (const p of patterns) {
    const error = patternError(p);
    if (error !== null) throw new UsageError(`--discovery-allow ${error}`);
  }
  const limits = definedFields({ maxPeers, maxEntriesPerPeer, maxMessageBytes });
  return {
    url,
    cluster: cluster ?? DEFAULT_CLUSTER,
    heartbeatMs: hb,
    peerTimeoutMs: timeout,
    stateEveryMs: DEFAULT_STATE_EVERY_MS,
    ...(auth !== null && { auth }),
    ...(Object.keys(limits).length > 0 && { limits }),
    ...((allow !== undefined || maxBackends !== undefined) && {
      discovery: {
        allow: patterns,
        maxBackends: maxBackends ?? DEFAULT_MAX_DISCOVERED_BACKENDS,
      },
    }),
  };
}

/** `--check-config FILE`: the config as `serve` would run it, summarized; nothing starts. */
function checkConfig(flags: Flags, path: string): number {
  const config = readServeConfig(flags, path);
  const a = config.admission;
  process.stdout.write(
    `${path}: valid (port ${config.port}, ${config.backends.length > 0 ? `${config.backends.length} backends` : `embedded fleet of ${config.embeddedReplicas}`}, policy ${config.policy}, ` +
      `${Object.keys(a.tenantLimits).length} tenants with limits, max-queue-ms ${a.maxQueueMs ?? 'none'}, max-ttft-ms ${a.maxTtftMs ?? 'none'}, flow-control ${config.flowControl.enabled ? 'on' : 'off'})\n`,
  );
  return 0;
}

function readable(path: string, flag: string): void {
  try {
    accessSync(path);
  } catch (err) {
    throw new UsageError(
      `${flag} cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`,
    );
  }
}

export async function run(argv: string[]): Promise<number> {
  const flags = readFlags(argv, specOf(SERVE_OPTIONS));
  if (flags === 'help') return printHelp(HELP);
  const option = readerOf(SERVE_OPTIONS, flags);
  const checkPath = option('check-config');
  if (checkPath !== undefined) return checkConfig(flags, checkPath);
  const config = readServeConfig(flags);
  const speedup = option('speedup');
  const real = await readRuntimeFlags(flags);
  if (real && config.backends.length > 0) {
    throw new UsageError('--runtime llama.cpp is for the embedded fleet: give no --backend');
  }
  if (real && speedup !== undefined && speedup !== 1) {
    throw new UsageError('--speedup: real engines run in real time (1 only)');
  }
  // Two real engines at most on a small machine, unless told.
  if (real && !flags.has('replicas')) config.embeddedReplicas = 2;
  // The gateway keys blocks with the tokenizer the tiny model was made from.
  if (real?.gatewayTokenizer && !flags.has('tokenizer')) config.tokenizer = real.gatewayTokenizer;
  const logger = makeLogger({ level: config.logLevel });
  const gateway = await startGatewayWithFleet(config, {
    logger,
    ...(speedup !== undefined && { embeddedSpeedup: speedup }),
    ...(real && { embeddedReal: real }),
  });
  const out = process.stdout;
  out.write(
    `kvroute serve listening on ${gateway.url} (policy ${policyLabel(config)}, index ${config.index}, tokenizer ${config.tokenizer}${config.tokenize === 'remote' ? ' (remote)' : ''}${config.apiKeys.length > 0 ? `, ${config.apiKeys.length} API keys` : ''})\n`,
  );
  if (config.nats !== null) {
    out.write(
      `sharing routing state over NATS ${config.nats.url} (cluster ${config.nats.cluster}${config.backends.length === 0 ? '; backends: the engines registered there' : ''})\n`,
    );
  }
  const kind = real ? 'embedded llama.cpp engines' : 'embedded simulated engines';
  out.write(`replicas${gateway.replicas[0]?.embedded ? ` (${kind})` : ''}:\n`);
  for (const r of gateway.replicas) {
    out.write(
      `  ${r.name.padEnd(22)} ${r.url}  model=${r.model ?? '?'} events=${r.events ?? '-'} replay=${r.replay ?? '-'}\n`,
    );
  }
  if (config.index === 'events') {
    for (const r of gateway.replicas.filter((x) => x.events === null)) {
      process.stderr.write(
        `kvroute serve: ${r.name} has no events endpoint; the router knows its cache only from recent routes (set events= or use --index approx)\n`,
      );
    }
  }
  const auth = config.apiKeys.length > 0 ? " -H 'authorization: Bearer YOUR_KEY'" : '';
  const admin =
    config.apiKeys.length > 0 || config.adminKey !== null
      ? " -H 'authorization: Bearer ADMIN_KEY'"
      : '';
  out.write(`dashboard: ${gateway.url}/${admin ? '#key=ADMIN_KEY' : ''}\n`);
  out.write(
    `try:\n  curl -s ${gateway.url}/v1/chat/completions -H 'content-type: application/json'${auth} -d '{"messages":[{"role":"user","content":"Hello!"}],"max_tokens":16}'\n  curl -s ${gateway.url}/router/replicas${admin}\n`,
  );
  logger.info(
    {
      url: gateway.url,
      policy: config.policy,
      index: config.index,
      replicas: gateway.replicas.length,
    },
    'gateway started',
  );
  const stopReloading = reloadOnChange(flags, gateway, logger);
  return serveUntilSignal(async () => {
    stopReloading();
    await gateway.close();
  });
}

/**
 * SIGHUP, or a change of the `--config` file: the file is read again under the same flags and
 * the gateway applies what changed. Without `--config`, SIGHUP only says there is nothing to read.
 */
function reloadOnChange(
  flags: Flags,
  gateway: { reload(next: GatewayConfig): unknown },
  logger: Logger,
): () => void {
  const path = flags.string('config');
  const reload = (why: string): void => {
    if (path === undefined) {
      logger.warn({ why }, 'nothing to reload: the gateway was started without --config');
      return;
    }
    // A file caught between an editor's truncate and its write reads empty: as a config that is
    // "no backends", which would drain the fleet. The write's own change event reads it again.
    if (isEmptyFile(path)) {
      logger.warn(
        { why, path },
        'config not reloaded: the file is empty; the running config stays',
      );
      return;
    }
    logger.info({ why, path }, 'reading the config again');
    let next: GatewayConfig;
    try {
      next = readServeConfig(flags);
    } catch (err) {
      logger.error(
        { why, path, err: (err as Error).message },
        'config not reloaded: the file is invalid; the running config stays',
      );
      return;
    }
    try {
      gateway.reload(next);
    } catch (err) {
      logger.error({ why, path, err }, 'config reload failed part way');
    }
  };
  const onHangup = (): void => reload('SIGHUP');
  process.on('SIGHUP', onHangup);
  const watcher = path === undefined ? null : watchConfigFile(path, () => reload('file changed'));
  return () => {
    process.off('SIGHUP', onHangup);
    watcher?.close();
  };
}

function isEmptyFile(path: string): boolean {
  try {
    return statSync(path).size === 0;
  } catch {
    return false; // unreadable: readServeConfig names the error
  }
}
