/**
 * `kvroute serve`: the KV-aware OpenAI-compatible gateway. With no backend it starts an embedded
 * fleet of simulated engines and routes to them (that is `npm start`). Flags override the YAML
 * config file; every bad value is one line naming the flag (exit 2). The config file is read
 * again on SIGHUP and when it changes; a bad one logs one error and the running config stays.
 */
import { accessSync, statSync } from 'node:fs';
import {
  type ClientKey,
  DEFAULT_EMBEDDED_REPLICAS,
  DEFAULT_SESSION_HEADER,
  DEFAULT_SESSION_SLACK_TOKENS,
  defaultConfig,
  defaultSessionAffinity,
  type GatewayConfig,
  headerName,
  LOG_LEVELS,
  loadConfigFile,
  parseApiKeyFlag,
  parseBackendFlag,
  type SessionAffinityConfig,
} from '../gateway/config.ts';
import { DEFAULT_SESSION_CAPACITY } from '../router/sessionMap.ts';
import {
  DEFAULT_PLANNER_INTERVAL_S,
  DEFAULT_PLANNER_MAX_REPLICAS,
  DEFAULT_PLANNER_SCALE_DOWN_S,
  DEFAULT_PLANNER_WINDOW_S,
  defaultPlannerConfig,
  type PlannerConfig,
} from '../gateway/planner.ts';
import { TOKENIZE_MODES } from '../gateway/requestTokenizers.ts';
import { startGatewayWithFleet } from '../embedded/gateway.ts';
import { type Logger, makeLogger } from '../gateway/log.ts';
import { watchConfigFile } from '../gateway/reload.ts';
import { INDEX_MODES, isPolicyName, POLICY_NAMES } from '../router/index.ts';
import {
  DEFAULT_HEARTBEAT_MS,
  DEFAULT_PEER_TIMEOUT_MS,
  DEFAULT_STATE_EVERY_MS,
  type SyncConfig,
} from '../sync/stateSync.ts';
import { DEFAULT_CLUSTER, isClusterName } from '../sync/subjects.ts';
import { DEFAULT_MAX_DISCOVERED_BACKENDS, patternError } from '../sync/discoveryPolicy.ts';
import { DEFAULT_SYNC_LIMITS } from '../sync/bounds.ts';
import { type Flags, flagSpec, printHelp, readFlags, UsageError } from './args.ts';
import { FLOW_BOOLEAN_FLAGS, FLOW_FLAG_NAMES, FLOW_HELP, readFlowFlags } from './flowFlags.ts';
import { NATS_AUTH_FLAG_NAMES, NATS_AUTH_HELP, readNatsAuth } from './natsFlags.ts';
import { RUNTIME_FLAG_NAMES, readRuntimeFlags } from './runtimeFlags.ts';
import { serveUntilSignal } from './untilSignal.ts';

/** The NATS flags past --nats, --cluster and the heartbeat's: credentials, TLS, bounds (epp's too). */
export const NATS_FLAG_NAMES = `${NATS_AUTH_FLAG_NAMES} nats-max-peers nats-max-peer-entries nats-max-message-bytes`;

/** The bounds' help, serve's and epp's. */
export const NATS_BOUNDS_HELP = `  --nats-max-peers N    peers held at once; one more is refused (default ${DEFAULT_SYNC_LIMITS.maxPeers})
  --nats-max-peer-entries N  entries one peer may hold per model pool (default ${DEFAULT_SYNC_LIMITS.maxEntriesPerPeer})
  --nats-max-message-bytes N  a larger message is dropped unread (default ${DEFAULT_SYNC_LIMITS.maxMessageBytes})
`;

const PLANNER_FLAG_NAMES =
  'planner-window-s planner-interval-s planner-scale-down-s planner-profile planner-slo-ttft-p99-ms planner-slo-tpot-p99-ms planner-max-replicas planner-slo-ttft-slowdown';

const FLAGS = flagSpec({
  string:
    'port host config policy index tokenizer chat-template tokenize stale-ms kv-threshold scrape-ms ' +
    'block-size replicas speedup seed admin-key metrics-key first-byte-timeout-ms ' +
    'headers-timeout-ms request-timeout-ms log-level max-queue-ms max-ttft-ms prefill-us-per-token check-config ' +
    `nats cluster nats-heartbeat-ms nats-peer-timeout-ms ${NATS_FLAG_NAMES} discovery-allow discovery-max-backends pd-threshold decode-cost-tokens engine-budget kv-events-bind session-header session-slack-tokens session-max ${PLANNER_FLAG_NAMES} ${RUNTIME_FLAG_NAMES} ${FLOW_FLAG_NAMES}`,
  multiple: 'backend api-key',
  boolean: `access-log expose-replica-addresses session-affinity planner ${FLOW_BOOLEAN_FLAGS}`,
});

const D = defaultConfig();
const HELP = `usage: kvroute serve [flags]

A KV-cache-aware OpenAI-compatible gateway: tokenizes each request, asks the router for the
replica where it adds the least prefill work, and proxies the response back unchanged.
With no --backend (and none in --config) it starts ${DEFAULT_EMBEDDED_REPLICAS} simulated engines in this process.

  --port N              listen port; 0 picks a free one (default ${D.port})
  --host H              interface (default ${D.host})
  --backend SPEC        a backend, repeatable: URL[,events=tcp://H:P][,replay=tcp://H:P]
                        [,model=NAME][,api-key=KEY][,role=prefill|decode|both][,topic=T];
                        replaces the config file's list; role: a P/D fleet, prefill on the
                        prefill pool then decode on the decode pool (vLLM's NixlConnector
                        protocol); topic: its KV events' topic on --kv-events-bind;
                        [,engine=vllm|sglang]: sglang reads SGLang's KV events (pages
                        re-cut into --block-size blocks), sglang:* metrics and /tokenize;
                        [,gpu=NAME][,tp=N][,profile=FILE]: its hardware in a mixed pool
                        (delay-cost prices its tokens at its own speed);
                        [,kv-offloading-size=GiB | ,cpu-kv-blocks=N]: its engine's CPU tier
                        of KV, as the engine was given it (GiB, as vLLM's kv-offloading-size,
                        or the OffloadingConnector's num_cpu_blocks in blocks of
                        --block-size), modelled by --index approx (GiB in blocks of the
                        catalog model its model= names, else llama-3.3-70b); [,kv-blocks=N]:
                        its GPU pool, where --index approx forgets (default 34,882); the
                        events index reads both tiers from the events;
                        [,cache-ram-tokens=N | ,cache-ram=MIB,kv-bytes-per-token=B]: a
                        llama-server's host prompt cache (its cache-ram setting, which it does not
                        serve), for the router's slot model: in tokens (0: none), or in MiB
                        with the KV bytes of a token (2 x n_layer x n_head_kv x head_dim x
                        bytes per element); absent: routed on its slots alone
  --pd-threshold N      P/D: fewer uncached tokens than N on the decode replica run there
                        alone (llm-d's prefix-based decider; default 0: always disaggregate)
  --config FILE         YAML config (see kvroute.example.yaml); flags override it; read
                        again on SIGHUP and when it changes (backends added start cold,
                        removed ones drain)
  --policy P            ${POLICY_NAMES.join(', ')} (default ${D.policy})
  --index M             events (KV events over ZMQ) | approx (the router's own record)
                        (default ${D.index})
  --kv-events-bind EP   bind one ZMQ SUB socket here (tcp://*:5557) for engines to connect
                        their publishers to, as llm-d deploys it; a batch goes to the backend
                        its topic kv@<pod-ip>@<model> names (the pod being the backend URL's
                        host) or whose topic= key it is; other topics are counted, not indexed
  --tokenizer DIR       a model folder (tokenizer.json, tokenizer_config.json, optional
                        chat_template.jinja), as vLLM's --tokenizer; builtin: the simulated
                        engines' cl100k_base (default ${D.tokenizer})
  --chat-template FILE  a Jinja chat template, as vLLM's --chat-template (default: the
                        tokenizer's own)
  --tokenize M          local (tokenize here) | remote (each request through a backend's
                        /tokenize: exact for any template, one more round trip) (default ${D.tokenize})
  --stale-ms N          exclude replicas whose last report is older (default ${D.staleMs})
  --kv-threshold F      exclude replicas above this KV usage (default ${D.kvThreshold})
  --scrape-ms N         /metrics scrape interval (default ${D.scrapeMs})
  --api-key KEY[=TENANT] require this client key, repeatable; its tenant salts the cache
  --admin-key KEY       key for /router/replicas and /router/backends (closed to client keys
                        once any is set); without it backends cannot be added or removed
                        at run time (POST/DELETE /router/backends)
  --metrics-key KEY     key for /metrics (the admin key works too; default: open, closed
                        to all but the admin key once any --api-key is set)
  --first-byte-timeout-ms N  no response byte by then: retry on another replica and probe
                        the silent one (default ${D.firstByteTimeoutMs})
  --headers-timeout-ms N     a client's headers must arrive within this (default ${D.headersTimeoutMs})
  --request-timeout-ms N     and its whole request within this (default ${D.requestTimeoutMs})
  --log-level L         ${LOG_LEVELS.join(', ')} (default ${D.logLevel}); JSON lines on
                        stderr, readable text when stderr is a terminal
  --access-log          one log line per request: tenant, model, replica, cached tokens, TTFT
  --expose-replica-addresses  x-kvroute-replica and x-kvroute-prefill-replica give the
                        replica's host:port (default: a label, replica-0, replica-1, ...)
  --block-size N        tokens per KV block, as the engines use (default ${D.blockSize})
  --replicas N          embedded fleet size (default ${DEFAULT_EMBEDDED_REPLICAS})
  --speedup F           embedded engines' modeled time / wall time (default 1)
  --runtime llama.cpp [--gguf FILE] [--threads N]  real embedded engines on the CPU (default
                        model: the tiny one, with --tokenizer set to Llama 3's to match it)
  --seed N              router seed: tie-breaks and the random policy (default ${D.seed}, as sim)
  --decode-cost-tokens C  delay-cost counts each running decode as C prompt tokens of step time
                        in every step a request waits through (a CPU engine: tens; default: not
                        counted, as on a GPU); kvroute calibrate --step-table prints C
  --engine-budget N     the backends' tokens per step, for that term (default 2048)
  --session-affinity    keep a conversation on the replica it used last while that one's cost
                        is within --session-slack-tokens of the best (for engines whose cache
                        the router cannot see); the key: the --session-header header, else the
                        body's session_id, else its user
  --session-header NAME the session key's header (default ${DEFAULT_SESSION_HEADER}); implies --session-affinity
  --session-slack-tokens N  prompt tokens of extra queue a session accepts to stay (default ${DEFAULT_SESSION_SLACK_TOKENS})
  --session-max N       sessions remembered per model, least recently used forgotten first
                        (default ${DEFAULT_SESSION_CAPACITY})
online planner (docs/planner.md#online)
  --planner             replay the live traffic of the last --planner-window-s on the simulator
                        every --planner-interval-s and export the fewest replicas meeting the
                        SLO: gauge kvroute_planner_desired_replicas{pool}, GET /planner/desired
                        (KEDA metrics-api, valueLocation desiredReplicas), a log line on change
  --planner-window-s S  the traffic window fitted (default ${DEFAULT_PLANNER_WINDOW_S})
  --planner-interval-s S  how often the search runs (default ${DEFAULT_PLANNER_INTERVAL_S})
  --planner-scale-down-s S  a lower answer must hold this long before the count goes down
                        (default ${DEFAULT_PLANNER_SCALE_DOWN_S}); an answer above it applies at once
  --planner-profile FILE  the engines' calibrated profile (kvroute calibrate; default: the
                        catalog's model, as kvroute sim)
  --planner-slo-ttft-p99-ms MS, --planner-slo-tpot-p99-ms MS  the SLO (default: kvroute sim's)
  --planner-slo-ttft-slowdown X  instead of a fixed TTFT: p99 of TTFT / the request's own cold
                        TTFT at most X (prompts whose prefill alone outlasts a fixed target)
  --planner-max-replicas N  most replicas tried; the answer when none meets the SLO
                        (default ${DEFAULT_PLANNER_MAX_REPLICAS})
admission (per-tenant limits and priority classes: the config file's tenants, see docs/routing.md)
  --max-queue-ms N      429 while every eligible replica has more than N ms of modelled
                        prefill queued (default: no bound)
  --max-ttft-ms N       429 when the request's modelled TTFT on the replica it was routed to
                        (prefill queued there + its own uncached prefill) is over N ms
  --prefill-us-per-token F   the served model's prefill cost for that bound (default
                        ${D.admission.prefillUsPerToken.toFixed(1)}, the seed replica)
  --check-config FILE   validate FILE (with the other flags) and exit: 0 valid, 2 not
${FLOW_HELP}several gateways (see docs/nats.md)
  --nats URL            share routing state with the cluster's other gateways over NATS
                        (nats://HOST:4222): every decision and release, so each sees every
                        replica's whole queue; with no --backend, follow the engines registered
                        there (kvroute engine --nats URL --advertise URL)
  --cluster NAME        gateways and engines of one cluster share state (default ${DEFAULT_CLUSTER})
  --nats-heartbeat-ms N      heartbeat period (default ${DEFAULT_HEARTBEAT_MS})
  --nats-peer-timeout-ms N   a peer silent this long has its in-flight entries dropped
                        (default ${DEFAULT_PEER_TIMEOUT_MS})
${NATS_AUTH_HELP}${NATS_BOUNDS_HELP}  --discovery-allow LIST  engines taken from discovery only at these addresses, comma-separated:
                        CIDRs (10.0.0.0/8), IPs, host names, *.suffix (default: any; set it)
  --discovery-max-backends N  most engines taken from discovery (default ${DEFAULT_MAX_DISCOVERED_BACKENDS})
`;

/** Flags over the config file over the defaults. */
export function readServeConfig(flags: Flags, path = flags.string('config')): GatewayConfig {
  let config = path === undefined ? defaultConfig() : loadConfigFile(path);
  const set = <K extends keyof GatewayConfig>(
    key: K,
    value: GatewayConfig[K] | undefined,
  ): void => {
    if (value !== undefined) config = { ...config, [key]: value };
  };
  set('port', flags.number('port', { min: 0, max: 65535, integer: true }));
  set('host', flags.string('host'));
  const policy = flags.string('policy');
  if (policy !== undefined && !isPolicyName(policy)) {
    throw new UsageError(`--policy must be one of ${POLICY_NAMES.join(', ')}; got '${policy}'`);
  }
  set('policy', policy);
  if (!isPolicyName(config.policy)) {
    throw new UsageError(
      `config: policy must be one of ${POLICY_NAMES.join(', ')}; got '${config.policy}'`,
    );
  }
  set('index', flags.oneOf('index', INDEX_MODES));
  const bind = flags.string('kv-events-bind');
  if (bind !== undefined && !/^(tcp|ipc|inproc):\/\/.+/.test(bind)) {
    throw new UsageError(
      `--kv-events-bind must be a ZMQ endpoint such as tcp://*:5557, got '${bind}'`,
    );
  }
  set('kvEventsBind', bind);
  const tokenizer = flags.string('tokenizer');
  if (tokenizer !== undefined && tokenizer !== 'builtin') readable(tokenizer, '--tokenizer');
  set('tokenizer', tokenizer);
  // The loader tells a missing file from a template given inline, as vLLM's flag allows both.
  set('chatTemplate', flags.string('chat-template'));
  set('tokenize', flags.oneOf('tokenize', TOKENIZE_MODES));
  set('staleMs', flags.positive('stale-ms'));
  set('kvThreshold', flags.fraction('kv-threshold'));
  set('scrapeMs', flags.positive('scrape-ms'));
  set('blockSize', flags.positive('block-size', true));
  set('seed', flags.number('seed', { min: 0, integer: true }));
  set('embeddedReplicas', flags.number('replicas', { min: 1, max: 64, integer: true }));
  const backends = flags.strings('backend');
  if (backends.length > 0)
    set(
      'backends',
      backends.map((b) => parseBackendFlag(b)),
    );
  const keys: ClientKey[] = flags.strings('api-key').map(parseApiKeyFlag);
  if (keys.length > 0) set('apiKeys', keys);
  set('adminKey', nonEmptyFlag(flags, 'admin-key'));
  set('metricsKey', nonEmptyFlag(flags, 'metrics-key'));
  set('firstByteTimeoutMs', flags.positive('first-byte-timeout-ms', true));
  set('headersTimeoutMs', flags.positive('headers-timeout-ms', true));
  set('requestTimeoutMs', flags.positive('request-timeout-ms', true));
  if (config.headersTimeoutMs > config.requestTimeoutMs) {
    throw new UsageError(
      `--headers-timeout-ms (${config.headersTimeoutMs}) must not exceed --request-timeout-ms (${config.requestTimeoutMs})`,
    );
  }
  set('logLevel', flags.oneOf('log-level', LOG_LEVELS));
  if (flags.bool('access-log')) set('accessLog', true);
  set('sessionAffinity', readSessionFlags(flags, config.sessionAffinity));
  set('planner', readPlannerFlags(flags, config.planner));
  if (flags.bool('expose-replica-addresses')) set('exposeReplicaAddresses', true);
  const maxQueueMs = flags.positive('max-queue-ms');
  const maxTtftMs = flags.positive('max-ttft-ms');
  const prefillUs = flags.positive('prefill-us-per-token');
  if (maxQueueMs !== undefined || maxTtftMs !== undefined || prefillUs !== undefined) {
    set('admission', {
      ...config.admission,
      ...(maxQueueMs !== undefined && { maxQueueMs }),
      ...(maxTtftMs !== undefined && { maxTtftMs }),
      ...(prefillUs !== undefined && { prefillUsPerToken: prefillUs }),
    });
  }
  set('flowControl', readFlowFlags(flags, config.flowControl));
  set('nats', readNatsFlags(flags, config.nats));
  set('pdThreshold', flags.number('pd-threshold', { min: 0, integer: true }));
  const decodeCost = flags.number('decode-cost-tokens', { min: 0 });
  const engineBudget = flags.number('engine-budget', { min: 1, integer: true });
  if (engineBudget !== undefined && decodeCost === undefined && config.decodeCost === undefined) {
    throw new UsageError('--engine-budget needs --decode-cost-tokens C');
  }
  if (decodeCost !== undefined || engineBudget !== undefined) {
    const tokens = decodeCost ?? config.decodeCost!.tokens;
    const budgetTokens = engineBudget ?? config.decodeCost?.budgetTokens;
    set('decodeCost', { tokens, ...(budgetTokens !== undefined && { budgetTokens }) });
  }
  return config;
}

/** --planner and its companions; any of them turns the planner on. */
function readPlannerFlags(flags: Flags, current: PlannerConfig | null): PlannerConfig | null {
  const windowS = flags.positive('planner-window-s');
  const intervalS = flags.positive('planner-interval-s');
  const scaleDownS = flags.number('planner-scale-down-s', { min: 0 });
  const profile = nonEmptyFlag(flags, 'planner-profile');
  const sloTtftP99Ms = flags.positive('planner-slo-ttft-p99-ms');
  const sloTpotP99Ms = flags.positive('planner-slo-tpot-p99-ms');
  const maxReplicas = flags.positive('planner-max-replicas', true);
  const slowdown = flags.number('planner-slo-ttft-slowdown', { min: 1 });
  const given = [
    windowS,
    intervalS,
    scaleDownS,
    profile,
    sloTtftP99Ms,
    sloTpotP99Ms,
    maxReplicas,
    slowdown,
  ];
  if (!flags.bool('planner') && given.every((v) => v === undefined)) return current;
  if (profile !== undefined) {
    try {
      accessSync(profile);
    } catch {
      throw new UsageError(`--planner-profile: cannot read '${profile}'`);
    }
  }
  const c = current ?? defaultPlannerConfig();
  const ttft = sloTtftP99Ms ?? (slowdown === undefined ? c.sloTtftP99Ms : null);
  const relative = slowdown ?? (sloTtftP99Ms === undefined ? c.sloTtftSlowdown : null);
  if (ttft !== null && relative !== null) {
    throw new UsageError(
      '--planner-slo-ttft-p99-ms and --planner-slo-ttft-slowdown are alternative TTFT targets; give one',
    );
  }
  return {
    windowS: windowS ?? c.windowS,
    intervalS: intervalS ?? c.intervalS,
    scaleDownS: scaleDownS ?? c.scaleDownS,
    profile: profile ?? c.profile,
    sloTtftP99Ms: ttft,
    sloTtftSlowdown: relative,
    sloTpotP99Ms: sloTpotP99Ms ?? c.sloTpotP99Ms,
    maxReplicas: maxReplicas ?? c.maxReplicas,
  };
}

/** --session-affinity and its companions; any of them turns affinity on. */
function readSessionFlags(
  flags: Flags,
  current: SessionAffinityConfig | null,
): SessionAffinityConfig | null {
  const header = flags.string('session-header');
  const slackTokens = flags.number('session-slack-tokens', { min: 0 });
  const capacity = flags.number('session-max', { min: 1, integer: true });
  const on = flags.bool('session-affinity');
  if (!on && header === undefined && slackTokens === undefined && capacity === undefined) {
    return current;
  }
  const base = current ?? defaultSessionAffinity();
  let name = base.header;
  if (header !== undefined) {
    try {
      name = headerName(header, 'session-header');
    } catch {
      throw new UsageError(`--session-header: '${header}' is not an HTTP header name`);
    }
  }
  return {
    header: name,
    slackTokens: slackTokens ?? base.slackTokens,
    capacity: capacity ?? base.capacity,
  };
}

/** --nats and its companions; the others without --nats are an error (they would do nothing). */
function readNatsFlags(flags: Flags, current: SyncConfig | null): SyncConfig | null {
  const url = nonEmptyFlag(flags, 'nats');
  const cluster = flags.string('cluster');
  const heartbeatMs = flags.positive('nats-heartbeat-ms', true);
  const peerTimeoutMs = flags.positive('nats-peer-timeout-ms', true);
  const auth = readNatsAuth(flags);
  const maxPeers = flags.positive('nats-max-peers', true);
  const maxEntriesPerPeer = flags.positive('nats-max-peer-entries', true);
  const maxMessageBytes = flags.positive('nats-max-message-bytes', true);
  const allow = flags.string('discovery-allow');
  const maxBackends = flags.positive('discovery-max-backends', true);
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
  const limits = {
    ...(maxPeers !== undefined && { maxPeers }),
    ...(maxEntriesPerPeer !== undefined && { maxEntriesPerPeer }),
    ...(maxMessageBytes !== undefined && { maxMessageBytes }),
  };
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

function nonEmptyFlag(flags: Flags, name: string): string | undefined {
  const v = flags.string(name);
  if (v === '') throw new UsageError(`--${name} must not be empty`);
  return v;
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
  const flags = readFlags(argv, FLAGS);
  if (flags === 'help') return printHelp(HELP);
  const checkPath = flags.string('check-config');
  if (checkPath !== undefined) return checkConfig(flags, checkPath);
  const config = readServeConfig(flags);
  const speedup = flags.positive('speedup');
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
    `kvroute serve listening on ${gateway.url} (policy ${config.policy}, index ${config.index}, tokenizer ${config.tokenizer}${config.tokenize === 'remote' ? ' (remote)' : ''}${config.apiKeys.length > 0 ? `, ${config.apiKeys.length} API keys` : ''})\n`,
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
