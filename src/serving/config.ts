/**
 * `kvroute serve` configuration: a YAML file (keys spelled as the flags) merged under the
 * command-line flags. Everything is validated here, so the rest of the gateway reads a plain,
 * complete `GatewayConfig` and never re-checks a value.
 */
import { ENGINE_KINDS, type EngineKind, isEngineKind } from '../engines/dialect.ts';
import type { SyncConfig } from '../sync/stateSync.ts';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import {
  DEFAULT_KV_THRESHOLD,
  DEFAULT_POLICY,
  DEFAULT_STALE_MS,
  type IndexMode,
} from '../router/defaults.ts';
import { DEFAULT_SESSION_CAPACITY } from '../router/sessionMap.ts';
import { defaultPlannerConfig, type PlannerConfig } from './planner.ts';
import { type AdmissionConfig, defaultAdmission, readAdmissionDoc } from './admissionConfig.ts';
import { backendSpeed } from './backendSpeed.ts';
import { defaultFlowControl, type FlowControlConfig, readFlowDoc } from './flowConfig.ts';
import { configError, int, isRecord, mappingEntries, str } from './configValues.ts';
import { readScorersDoc, type ScorerWeights } from './configScorers.ts';
import type { LlmdPrefixConfig } from '../router/index/approxForgetting.ts';
import { GPUS } from '../model/catalog.ts';
import { GatewayError } from './errors.ts';
import { unknownKey } from '../cli/options/configKeys.ts';
import { configReaderOf } from '../cli/options/configValue.ts';
import {
  type FieldRows,
  type FieldValues,
  readFields,
  type RowsFor,
} from '../cli/options/fields.ts';
import type { OptionReader } from '../cli/options/read.ts';
import { SERVE_CONFIG_KEYS, SERVE_OPTIONS } from '../cli/options/serve.ts';
import { BACKEND_ROLES, type BackendRole, isBackendRole } from './pdRoles.ts';
import {
  DEFAULT_SESSION_HEADER,
  DEFAULT_SESSION_SLACK_TOKENS,
  GATEWAY_DEFAULTS,
  type LogLevel,
  type TokenizeMode,
} from './configDefaults.ts';
import type { BackendConfig } from './backendConfig.ts';

/** Read from here by `kvroute serve` and the deploy test; the rest from configDefaults. */
export { DEFAULT_EMBEDDED_REPLICAS, DEFAULT_PORT } from './configDefaults.ts';

/** A model pool's own tokenizer and chat template (default: the gateway's). */
export interface ModelTokenizer {
  /** null: the gateway's own. */
  tokenizer: string | null;
  chatTemplate: string | null;
}

export interface ClientKey {
  key: string;
  tenant: string;
}

export interface GatewayConfig {
  host: string;
  port: number;
  /** Empty: start the embedded fleet. */
  backends: BackendConfig[];
  policy: string;
  index: IndexMode;
  /** 'builtin' or a model folder with tokenizer.json (vLLM's `--tokenizer DIR`). */
  tokenizer: string;
  /** A Jinja chat template file (vLLM's `--chat-template`), or null for the tokenizer's own. */
  chatTemplate: string | null;
  /** 'local': tokenize here; 'remote': ask a backend's /tokenize for every request. */
  tokenize: TokenizeMode;
  /** Base model name -> the tokenizer and template of its pool, where not the gateway's. */
  modelTokenizers: Record<string, ModelTokenizer>;
  staleMs: number;
  kvThreshold: number;
  scrapeMs: number;
  blockSize: number;
  bodyLimitBytes: number;
  maxRetries: number;
  /** Client keys; empty means no authentication. */
  apiKeys: ClientKey[];
  /** Tenant name -> cache salt; a tenant not listed salts with its own name. */
  tenantSalts: Record<string, string>;
  /** Seed of the router's randomness (random policy, tie breaks). */
  seed: number;
  /** Replicas in the embedded fleet. */
  embeddedReplicas: number;
  /** Bearer key for `/router/replicas`; with client keys and no admin key, nobody reads it. */
  adminKey: string | null;
  /** Bearer key for `/metrics` (the admin key works too); null: open. */
  metricsKey: string | null;
  /** An attempt with no response byte by then is retried elsewhere and its replica probed. */
  firstByteTimeoutMs: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  logLevel: LogLevel;
  /** One log line per answered request (tenant, model, replica, cached tokens, TTFT, status). */
  accessLog: boolean;
  /** Replica headers name replicas by address (host:port), not by label (`replicaLabels.ts`). */
  exposeReplicaAddresses: boolean;
  /** Tenant limits, priority classes and the fleet queue bound (`admissionConfig.ts`). */
  admission: AdmissionConfig;
  /** Requests wait in the gateway while their pool is saturated (`flowConfig.ts`). */
  flowControl: FlowControlConfig;
  /**
   * `--nats URL`: routing state shared with the cluster's other gateways; with no backend,
   * the backends are those the engines register in NATS. Null: this gateway alone.
   */
  nats: SyncConfig | null;
  /** P/D: a request with fewer uncached tokens runs on its decode replica alone (llm-d's decider; 0: never). */
  pdThreshold?: number;
  /**
   * delay-cost's decode term (src/router/policies/decodeWork.ts): prompt tokens of step time one
   * running decode costs on the backends, and their tokens per step. Absent: decodes not counted.
   */
  decodeCost?: { tokens: number; budgetTokens?: number };
  /** `--scorer-weights`: llm-d's scorer weights for the llmd family; absent: each policy's own. */
  scorerWeights?: ScorerWeights;
  /**
   * `--prefix-cache-scorer`: the approximate index's record is llm-d's estimated
   * prefix-cache-scorer's, with these parameters; absent: kvroute's own record.
   */
  prefixCacheScorer?: LlmdPrefixConfig;
  /**
   * `--kv-events-bind tcp://*:P`: one SUB socket bound here that engines' publishers connect to,
   * batches attributed to backends by topic (centralEvents.ts). Null: none.
   */
  kvEventsBind: string | null;
  /** How often a backend whose events never arrived while it served requests is warned about. */
  eventsCheckMs: number;
  /**
   * Session affinity (`--session-affinity`, src/router/sessionMap.ts): a request's session key,
   * from the header or the body's `session_id` then `user`, keeps it on its session's last
   * replica while that one's cost is within `slackTokens` of the best. Null: off.
   */
  sessionAffinity: SessionAffinityConfig | null;
  /** The online planner (`--planner`, planner.ts); null: off. */
  planner: PlannerConfig | null;
}

/*
 * The config's fields that are one `kvroute serve` option's value, as read: the config file's
 * reader (`applyConfigDoc`) and the flags' (`src/cli/serve.ts`) both copy them by these lists
 * (`src/cli/options/fields.ts`). Each list is checked against the type of the fields it fills.
 */
type Serve = typeof SERVE_OPTIONS;

/** `kvroute serve`'s rows read by name: from its flags or from its config file. */
export type ServeReader = OptionReader<Serve>;

/** The fields of `fields` whose row `read` finds given (`readFields` on serve's table). */
export function readServeFields<F extends FieldRows<Serve>>(
  read: ServeReader,
  fields: F,
): FieldValues<Serve, F> {
  return readFields<Serve, F>(read, fields);
}

/** Fields taken as given, from the flag or the config key of the row each names. */
export const PLAIN_FIELDS = {
  host: 'host',
  port: 'port',
  index: 'index',
  tokenizer: 'tokenizer',
  chatTemplate: 'chat-template',
  tokenize: 'tokenize',
  staleMs: 'stale-ms',
  kvThreshold: 'kv-threshold',
  scrapeMs: 'scrape-ms',
  blockSize: 'block-size',
  seed: 'seed',
  pdThreshold: 'pd-threshold',
  embeddedReplicas: 'replicas',
  adminKey: 'admin-key',
  metricsKey: 'metrics-key',
  firstByteTimeoutMs: 'first-byte-timeout-ms',
  headersTimeoutMs: 'headers-timeout-ms',
  requestTimeoutMs: 'request-timeout-ms',
  logLevel: 'log-level',
  accessLog: 'access-log',
  exposeReplicaAddresses: 'expose-replica-addresses',
} as const satisfies { readonly [K in keyof GatewayConfig]?: RowsFor<Serve, GatewayConfig[K]> };

/** The online planner's fields (`--planner-*`; any of them turns the planner on). */
export const PLANNER_FIELDS = {
  windowS: 'planner-window-s',
  intervalS: 'planner-interval-s',
  scaleDownS: 'planner-scale-down-s',
  profile: 'planner-profile',
  sloTtftP99Ms: 'planner-slo-ttft-p99-ms',
  sloTpotP99Ms: 'planner-slo-tpot-p99-ms',
  sloTtftSlowdown: 'planner-slo-ttft-slowdown',
  maxReplicas: 'planner-max-replicas',
  fastWindowS: 'planner-fast-window-s',
} as const satisfies { readonly [K in keyof PlannerConfig]: RowsFor<Serve, PlannerConfig[K]> };

/** Session affinity's fields (`--session-*`; any of them turns affinity on). */
export const SESSION_FIELDS = {
  header: 'session-header',
  slackTokens: 'session-slack-tokens',
  capacity: 'session-max',
} as const satisfies {
  readonly [K in keyof SessionAffinityConfig]: RowsFor<Serve, SessionAffinityConfig[K]>;
};

/** Session affinity's settings. */
export interface SessionAffinityConfig {
  /** The header carrying the session key, lower case (default x-session-id). */
  header: string;
  /** How much costlier (prompt tokens) the session's replica may be than the best. */
  slackTokens: number;
  /** Sessions remembered per model pool (a bounded LRU). */
  capacity: number;
}

/** Session affinity on, with the defaults. */
export function defaultSessionAffinity(): SessionAffinityConfig {
  return {
    header: DEFAULT_SESSION_HEADER,
    slackTokens: DEFAULT_SESSION_SLACK_TOKENS,
    capacity: DEFAULT_SESSION_CAPACITY,
  };
}

export function defaultConfig(): GatewayConfig {
  return {
    ...GATEWAY_DEFAULTS,
    backends: [],
    policy: DEFAULT_POLICY,
    chatTemplate: null,
    modelTokenizers: {},
    staleMs: DEFAULT_STALE_MS,
    kvThreshold: DEFAULT_KV_THRESHOLD,
    apiKeys: [],
    tenantSalts: {},
    kvEventsBind: null,
    adminKey: null,
    metricsKey: null,
    accessLog: false,
    exposeReplicaAddresses: false,
    admission: defaultAdmission(),
    flowControl: defaultFlowControl(),
    nats: null,
    sessionAffinity: null,
    planner: null,
  };
}

/** Flag problems name the flag; file problems name the key path. */
/** Reads and validates a YAML config file on top of the defaults. */
export function loadConfigFile(path: string, base: GatewayConfig = defaultConfig()): GatewayConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new GatewayError('ERR_CONFIG', `cannot read config ${path}: ${(err as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    const first = (err as Error).message.split('\n')[0];
    throw new GatewayError('ERR_CONFIG', `config ${path} is not valid YAML: ${first}`);
  }
  return applyConfigDoc(doc ?? {}, base);
}

/**
 * Every top-level key a config file may hold: those `kvroute serve`'s option table declares
 * (src/cli/options/serve.ts), which also writes their docs.
 */
export const KNOWN_KEYS: ReadonlySet<string> = SERVE_CONFIG_KEYS;

/** Validates a parsed config document (object form of the YAML) onto `base`. */
export function applyConfigDoc(doc: unknown, base: GatewayConfig): GatewayConfig {
  if (!isRecord(doc)) throw configError('(top level)', 'must be a mapping');
  const unknown = unknownKey(doc, KNOWN_KEYS);
  if (unknown) throw configError(unknown.key, `is not a known key (${unknown.accepted})`);
  const value = configReaderOf(SERVE_OPTIONS, doc);
  const out: GatewayConfig = { ...base, ...readServeFields(value, PLAIN_FIELDS) };
  readCheckedScalars(doc, out);
  const decodeCost = readDecodeCostDoc(doc, value);
  if (decodeCost !== undefined) out.decodeCost = decodeCost;
  readScorersDoc(doc, out);
  out.sessionAffinity = readSessionDoc(doc, value, out.sessionAffinity);
  out.planner = readPlannerDoc(doc, out.planner);
  readListsDoc(doc, out);
  out.admission = readAdmissionDoc(doc, out.admission);
  out.flowControl = readFlowDoc(doc, out.flowControl);
  if (out.headersTimeoutMs > out.requestTimeoutMs) {
    throw configError(
      'headers-timeout-ms',
      `must not exceed request-timeout-ms (${out.requestTimeoutMs})`,
    );
  }
  return out;
}

/** The scalar keys each read with a check of its own, onto `out`. */
function readCheckedScalars(doc: Record<string, unknown>, out: GatewayConfig): void {
  // Any string here; `kvroute serve` names the policies when it is not one of them.
  if (doc.policy !== undefined) out.policy = str(doc.policy, 'policy');
  if (doc['body-limit-bytes'] !== undefined) {
    out.bodyLimitBytes = int(doc['body-limit-bytes'], 'body-limit-bytes', 1);
  }
  if (doc['max-retries'] !== undefined)
    out.maxRetries = int(doc['max-retries'], 'max-retries', 0, 10);
  if (doc['kv-events-bind'] !== undefined) {
    out.kvEventsBind = zmqUrl(doc['kv-events-bind'], 'kv-events-bind');
  }
}

/** delay-cost's decode term: `decode-cost-tokens`, and `engine-budget` beside it. */
function readDecodeCostDoc(
  doc: Record<string, unknown>,
  value: ServeReader,
): GatewayConfig['decodeCost'] {
  if (doc['engine-budget'] !== undefined && doc['decode-cost-tokens'] === undefined) {
    throw configError('engine-budget', 'needs decode-cost-tokens');
  }
  const tokens = value('decode-cost-tokens');
  if (tokens === undefined) return undefined;
  const budgetTokens = value('engine-budget');
  return { tokens, ...(budgetTokens !== undefined && { budgetTokens }) };
}

/** `session-affinity` and the `session-*` keys (any of them turns it on) over `current`. */
function readSessionDoc(
  doc: Record<string, unknown>,
  value: ServeReader,
  current: SessionAffinityConfig | null,
): SessionAffinityConfig | null {
  const given = (k: string): boolean => doc[k] !== undefined;
  if (!given('session-affinity') && !Object.values(SESSION_FIELDS).some(given)) return current;
  if (!(value('session-affinity') ?? true)) return null;
  const s = current ?? defaultSessionAffinity();
  const fields = readServeFields(value, SESSION_FIELDS);
  const header =
    fields.header === undefined ? s.header : headerName(fields.header, 'session-header');
  return { ...s, ...fields, header };
}

/** The list and mapping keys: backends, api-keys, models, tenants, onto `out`. */
function readListsDoc(doc: Record<string, unknown>, out: GatewayConfig): void {
  if (doc.backends !== undefined) {
    if (!Array.isArray(doc.backends)) throw configError('backends', 'must be a list');
    out.backends = doc.backends.map((b, i) => backendFromDoc(b, `backends[${i}]`));
  }
  if (doc['api-keys'] !== undefined) {
    if (!Array.isArray(doc['api-keys'])) throw configError('api-keys', 'must be a list');
    out.apiKeys = doc['api-keys'].map((k, i) => clientKeyFromDoc(k, `api-keys[${i}]`));
  }
  if (doc.models !== undefined) out.modelTokenizers = modelTokenizersOf(doc.models);
  if (doc.tenants !== undefined) out.tenantSalts = tenantSaltsOf(doc.tenants);
}

/** `models`: per base model, its tokenizer and chat template. */
function modelTokenizersOf(models: unknown): Record<string, ModelTokenizer> {
  const tokenizers: Record<string, ModelTokenizer> = {};
  for (const { name, spec, key } of mappingEntries(models, 'models', 'a mapping with tokenizer')) {
    for (const k of Object.keys(spec)) {
      if (k !== 'tokenizer' && k !== 'chat-template') {
        throw configError(`${key}.${k}`, 'is not a known key (tokenizer, chat-template)');
      }
    }
    tokenizers[name] = {
      tokenizer: spec.tokenizer == null ? null : str(spec.tokenizer, `${key}.tokenizer`),
      chatTemplate:
        spec['chat-template'] == null ? null : str(spec['chat-template'], `${key}.chat-template`),
    };
  }
  return tokenizers;
}

/** `tenants`: each tenant's cache salt, where given (its limits are admissionConfig.ts's). */
function tenantSaltsOf(tenants: unknown): Record<string, string> {
  const salts: Record<string, string> = {};
  const entries = mappingEntries(tenants, 'tenants', 'a mapping (cache-salt, limits...)');
  for (const { name, spec, key } of entries) {
    if (spec['cache-salt'] !== undefined) {
      salts[name] = str(spec['cache-salt'], `${key}.cache-salt`);
    }
  }
  return salts;
}

/**
 * One backend entry, as in the config's `backends` list and the admin API's
 * `POST /router/backends`: a URL, or a mapping of url, events, replay, model, api-key.
 */
export function backendFromDoc(doc: unknown, key: string): BackendConfig {
  if (typeof doc === 'string') return { ...emptyBackend(), url: httpUrl(doc, key) };
  if (!isRecord(doc)) throw configError(key, 'must be a URL or a mapping with url');
  for (const k of Object.keys(doc)) {
    if (
      ![
        'url',
        'events',
        'replay',
        'model',
        'api-key',
        'role',
        'engine',
        'topic',
        'gpu',
        'tp',
        'profile',
        'kv-offloading-size',
        'cpu-kv-blocks',
        'kv-blocks',
        'cache-ram-tokens',
        'cache-ram',
        'kv-bytes-per-token',
      ].includes(k)
    ) {
      throw configError(`${key}.${k}`, 'is not a known key');
    }
  }
  const out: BackendConfig = {
    url: httpUrl(doc.url, `${key}.url`),
    events: doc.events == null ? null : zmqUrl(doc.events, `${key}.events`),
    replay: doc.replay == null ? null : zmqUrl(doc.replay, `${key}.replay`),
    model: doc.model == null ? null : str(doc.model, `${key}.model`),
    apiKey: doc['api-key'] == null ? null : str(doc['api-key'], `${key}.api-key`),
    ...(doc.role != null && { role: roleOf(doc.role, `${key}.role`) }),
    ...(doc.engine != null && { engine: engineOf(doc.engine, `${key}.engine`) }),
    ...(doc.topic != null && { topic: nonEmpty(str(doc.topic, `${key}.topic`), `${key}.topic`) }),
    ...(doc.gpu != null && { gpu: gpuName(str(doc.gpu, `${key}.gpu`), `${key}.gpu`) }),
    ...(doc.tp != null && { tp: tpOf(String(doc.tp), `${key}.tp`) }),
    ...(doc.profile != null && {
      profile: nonEmpty(str(doc.profile, `${key}.profile`), `${key}.profile`),
    }),
    ...(doc['kv-offloading-size'] != null && {
      kvOffloadingSizeGiB: gibOf(doc['kv-offloading-size'], `${key}.kv-offloading-size`),
    }),
    ...(doc['cpu-kv-blocks'] != null && {
      cpuKvBlocks: blocksOf(doc['cpu-kv-blocks'], `${key}.cpu-kv-blocks`),
    }),
    ...(doc['kv-blocks'] != null && { kvBlocks: blocksOf(doc['kv-blocks'], `${key}.kv-blocks`) }),
    ...(doc['cache-ram-tokens'] != null && {
      cacheRamTokens: wholeOf(doc['cache-ram-tokens'], `${key}.cache-ram-tokens`, 0, 'tokens'),
    }),
    ...(doc['cache-ram'] != null && {
      cacheRamMiB: wholeOf(doc['cache-ram'], `${key}.cache-ram`, 0, 'MiB'),
    }),
    ...(doc['kv-bytes-per-token'] != null && {
      kvBytesPerToken: wholeOf(doc['kv-bytes-per-token'], `${key}.kv-bytes-per-token`, 1, 'bytes'),
    }),
  };
  oneCpuTier(out, key);
  hostCacheBound(out, key);
  backendSpeed(out, key);
  return out;
}

/** GiB of CPU tier, > 0 (vLLM's --kv-offloading-size); a flag's text or a config number. */
function gibOf(v: unknown, key: string): number {
  const n = typeof v === 'string' && /^\d+(\.\d+)?$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isFinite(n) || n <= 0) {
    throw configError(key, `must be a number of GiB > 0, got '${String(v)}'`);
  }
  return n;
}

/** Blocks of CPU tier, a whole number >= 1 (the connector's num_cpu_blocks). */
function blocksOf(v: unknown, key: string): number {
  const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1) {
    throw configError(key, `must be a whole number of blocks >= 1, got '${String(v)}'`);
  }
  return n;
}

/** A whole number >= `min` of `unit`; a flag's text or a config number. */
function wholeOf(v: unknown, key: string, min: number, unit: string): number {
  const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < min) {
    throw configError(key, `must be a whole number of ${unit} >= ${min}, got '${String(v)}'`);
  }
  return n;
}

/**
 * The host prompt cache's bound: `cache-ram-tokens`, or `cache-ram` with `kv-bytes-per-token`
 * (llama-server serves no token's state size: `/props`, `/slots` and `/v1/models`' `meta`, with
 * `n_embd` and `n_params` but no layer or KV-head count, do not give it); llama.cpp only.
 */
function hostCacheBound(b: BackendConfig, key: string): void {
  const tokens = b.cacheRamTokens !== undefined;
  const mib = b.cacheRamMiB !== undefined;
  const bytes = b.kvBytesPerToken !== undefined;
  if (!tokens && !mib && !bytes) return;
  if (tokens && (mib || bytes)) {
    throw configError(
      key,
      'takes cache-ram-tokens=N or cache-ram=MIB with kv-bytes-per-token=B, not both',
    );
  }
  if (mib && !bytes) {
    throw configError(
      key,
      "cache-ram needs kv-bytes-per-token=B (2 x n_layer x n_head_kv x head_dim x bytes per element): llama-server does not serve a token's state size; or give cache-ram-tokens=N instead",
    );
  }
  if (bytes && !mib) throw configError(key, 'kv-bytes-per-token needs cache-ram=MIB');
  if (b.engine !== undefined && b.engine !== 'llamacpp') {
    throw configError(
      key,
      `cache-ram, cache-ram-tokens and kv-bytes-per-token apply to engine=llamacpp, not ${b.engine}`,
    );
  }
}

function oneCpuTier(b: BackendConfig, key: string): void {
  if (b.kvOffloadingSizeGiB !== undefined && b.cpuKvBlocks !== undefined) {
    throw configError(key, 'takes kv-offloading-size or cpu-kv-blocks, not both');
  }
}

function gpuName(v: string, key: string): string {
  const name = v.toLowerCase();
  if (!Object.hasOwn(GPUS, name)) {
    throw configError(key, `unknown GPU '${v}'; accepted: ${Object.keys(GPUS).join(', ')}`);
  }
  return name;
}

function tpOf(v: string, key: string): number {
  const n = /^\d+$/.test(v) ? Number(v) : Number.NaN;
  if (!Number.isInteger(n) || n < 1 || (n & (n - 1)) !== 0) {
    throw configError(key, `must be a power of two (1, 2, 4, 8, ...), got '${v}'`);
  }
  return n;
}

function engineOf(v: unknown, key: string): EngineKind {
  if (!isEngineKind(v)) throw configError(key, `must be one of ${ENGINE_KINDS.join(', ')}`);
  return v;
}

function roleOf(v: unknown, key: string): BackendRole {
  if (!isBackendRole(v)) throw configError(key, `must be one of ${BACKEND_ROLES.join(', ')}`);
  return v;
}

function clientKeyFromDoc(doc: unknown, key: string): ClientKey {
  if (typeof doc === 'string') return { key: nonEmpty(doc, key), tenant: tenantOfKey(doc) };
  if (!isRecord(doc)) throw configError(key, 'must be a key or a mapping with key and tenant');
  const k = nonEmpty(str(doc.key, `${key}.key`), `${key}.key`);
  return { key: k, tenant: doc.tenant == null ? tenantOfKey(k) : str(doc.tenant, `${key}.tenant`) };
}

const emptyBackend = (): BackendConfig => ({
  url: '',
  events: null,
  replay: null,
  model: null,
  apiKey: null,
});

/**
 * `--backend URL[,events=tcp://H:P][,replay=tcp://H:P][,model=NAME][,api-key=KEY][,topic=T]`
 * `[,engine=vllm|llamacpp|sglang|openai]`
 * `[,gpu=NAME][,tp=N][,profile=FILE][,kv-offloading-size=GiB | ,cpu-kv-blocks=N][,kv-blocks=N]`
 * `[,cache-ram-tokens=N | ,cache-ram=MIB,kv-bytes-per-token=B]`.
 * Throws with the flag's name so the CLI can print it.
 */
export function parseBackendFlag(value: string, flag = '--backend'): BackendConfig {
  const [url = '', ...opts] = value.split(',');
  const out: BackendConfig = { ...emptyBackend(), url: httpUrl(url, flag) };
  for (const opt of opts) {
    const eq = opt.indexOf('=');
    const name = eq < 0 ? opt : opt.slice(0, eq);
    const v = eq < 0 ? '' : opt.slice(eq + 1);
    if (name === 'events') out.events = zmqUrl(v, `${flag} events`);
    else if (name === 'replay') out.replay = zmqUrl(v, `${flag} replay`);
    else if (name === 'model') out.model = nonEmpty(v, `${flag} model`);
    else if (name === 'api-key') out.apiKey = nonEmpty(v, `${flag} api-key`);
    else if (name === 'role') out.role = roleOf(v, `${flag} role`);
    else if (name === 'engine') out.engine = engineOf(v, `${flag} engine`);
    else if (name === 'topic') out.topic = nonEmpty(v, `${flag} topic`);
    else if (name === 'gpu') out.gpu = gpuName(v, `${flag} gpu`);
    else if (name === 'tp') out.tp = tpOf(v, `${flag} tp`);
    else if (name === 'profile') out.profile = nonEmpty(v, `${flag} profile`);
    else if (name === 'kv-offloading-size') {
      out.kvOffloadingSizeGiB = gibOf(v, `${flag} kv-offloading-size`);
    } else if (name === 'cpu-kv-blocks') out.cpuKvBlocks = blocksOf(v, `${flag} cpu-kv-blocks`);
    else if (name === 'kv-blocks') out.kvBlocks = blocksOf(v, `${flag} kv-blocks`);
    else if (name === 'cache-ram-tokens') {
      out.cacheRamTokens = wholeOf(v, `${flag} cache-ram-tokens`, 0, 'tokens');
    } else if (name === 'cache-ram') out.cacheRamMiB = wholeOf(v, `${flag} cache-ram`, 0, 'MiB');
    else if (name === 'kv-bytes-per-token') {
      out.kvBytesPerToken = wholeOf(v, `${flag} kv-bytes-per-token`, 1, 'bytes');
    } else
      throw configError(
        flag,
        `has unknown option '${name}' (events, replay, model, api-key, role, engine, topic, gpu, tp, profile, kv-offloading-size, cpu-kv-blocks, kv-blocks, cache-ram-tokens, cache-ram, kv-bytes-per-token)`,
      );
  }
  oneCpuTier(out, flag);
  hostCacheBound(out, flag);
  backendSpeed(out, flag);
  return out;
}

/** `--api-key KEY` or `--api-key KEY=TENANT`. */
export function parseApiKeyFlag(value: string): ClientKey {
  const eq = value.indexOf('=');
  const key = nonEmpty(eq < 0 ? value : value.slice(0, eq), '--api-key');
  const tenant = eq < 0 ? tenantOfKey(key) : nonEmpty(value.slice(eq + 1), '--api-key tenant');
  return { key, tenant };
}

/** A key without a named tenant is its own tenant, named by a digest so the key never leaks. */
export function tenantOfKey(key: string): string {
  return `key-${createHash('sha256').update(key).digest('hex').slice(0, 12)}`;
}

/** The planner's keys; any of them turns it on, `planner: false` turns it off. */
function readPlannerDoc(
  doc: Record<string, unknown>,
  current: PlannerConfig | null,
): PlannerConfig | null {
  const keys = Object.keys(doc).filter((k) => k.startsWith('planner'));
  if (keys.length === 0) return current;
  if (doc.planner !== undefined && !bool(doc.planner, 'planner')) return null;
  const given = readServeFields(configReaderOf(SERVE_OPTIONS, doc), PLANNER_FIELDS);
  const c = { ...(current ?? defaultPlannerConfig()), ...given };
  if (c.sloTtftSlowdown !== null && c.sloTtftP99Ms !== null) {
    throw configError(
      'planner-slo-ttft-slowdown',
      'and planner-slo-ttft-p99-ms are alternatives; give one',
    );
  }
  return c;
}

function bool(v: unknown, key: string): boolean {
  if (typeof v !== 'boolean') throw configError(key, 'must be true or false');
  return v;
}

/** An HTTP header name (RFC 9110 token), lower-cased as Node presents request headers. */
export function headerName(v: string, key: string): string {
  if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(v)) {
    throw configError(key, `is not an HTTP header name: '${v}'`);
  }
  return v.toLowerCase();
}

function nonEmpty(v: string, key: string): string {
  if (v.length === 0) throw configError(key, 'must not be empty');
  return v;
}

function httpUrl(v: unknown, key: string): string {
  const s = str(v, key);
  let url: URL;
  try {
    url = new URL(s);
  } catch {
    throw configError(key, `is not a URL: '${s}'`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw configError(key, `must be an http(s) URL, got '${s}'`);
  }
  return s.replace(/\/+$/, '');
}

function zmqUrl(v: unknown, key: string): string {
  const s = str(v, key);
  if (!/^(tcp|ipc|inproc):\/\/.+/.test(s))
    throw configError(key, `must be a ZMQ endpoint, got '${s}'`);
  return s;
}
