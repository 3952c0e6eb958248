/**
 * `kvroute serve`'s options, one row each: its flag spec, the options of its `--help`, the
 * config file's keys (`src/serving/config.ts` checks a file against them) and its tables in
 * docs/configuration.md all come from here. `epp` takes the same routing options.
 *
 * This module imports only leaf modules (no `serving/config.ts`), since the config reader
 * imports it.
 */
import {
  DEFAULT_BLOCK_SIZE,
  DEFAULT_EMBEDDED_REPLICAS,
  DEFAULT_FIRST_BYTE_TIMEOUT_MS,
  DEFAULT_HEADERS_TIMEOUT_MS,
  DEFAULT_HOST,
  DEFAULT_INDEX,
  DEFAULT_LOG_LEVEL,
  DEFAULT_PORT,
  DEFAULT_REQUEST_TIMEOUT_MS,
  DEFAULT_ROUTER_SEED,
  DEFAULT_SCRAPE_MS,
  DEFAULT_SESSION_HEADER,
  DEFAULT_SESSION_SLACK_TOKENS,
  DEFAULT_TOKENIZE,
  DEFAULT_TOKENIZER,
  LOG_LEVELS,
  TOKENIZE_MODES,
} from '../../serving/configDefaults.ts';
import {
  DEFAULT_PLANNER_INTERVAL_S,
  DEFAULT_PLANNER_FAST_WINDOW_S,
  DEFAULT_PLANNER_MAX_REPLICAS,
  DEFAULT_PLANNER_SCALE_DOWN_S,
  DEFAULT_PLANNER_WINDOW_S,
} from '../../serving/planner.ts';
import {
  DEFAULT_KV_THRESHOLD,
  DEFAULT_POLICY,
  DEFAULT_PREFILL_US_PER_TOKEN,
  DEFAULT_STALE_MS,
  INDEX_MODES,
} from '../../router/defaults.ts';
import { POLICY_NAMES } from '../../router/registry.ts';
import { DEFAULT_SESSION_CAPACITY } from '../../router/sessionMap.ts';
import { DEFAULT_SYNC_LIMITS } from '../../sync/bounds.ts';
import { DEFAULT_MAX_DISCOVERED_BACKENDS } from '../../sync/discoveryPolicy.ts';
import { DEFAULT_HEARTBEAT_MS, DEFAULT_PEER_TIMEOUT_MS } from '../../sync/stateSync.ts';
import { DEFAULT_CLUSTER } from '../../sync/subjects.ts';
import { FLOW_OPTIONS } from '../flowFlags.ts';
import { LLMD_SCORER_OPTIONS as L } from '../llmdScorerFlags.ts';
import { NATS_AUTH_OPTIONS } from '../natsFlags.ts';
import { RUNTIME_OPTIONS } from '../runtimeFlags.ts';
import { configKeysOf } from './configKeys.ts';
import { bool, configOnly, int, list, num, oneOf, options, str } from './table.ts';

const BACKEND_SPEC =
  "a backend, repeatable: URL[,events=tcp://H:P][,replay=tcp://H:P] [,model=NAME][,api-key=KEY][,role=prefill|decode|both][,topic=T]; replaces the config file's list; role: a P/D fleet, prefill on the prefill pool then decode on the decode pool (vLLM's NixlConnector protocol); topic: its KV events' topic on --kv-events-bind; [,engine=vllm|sglang]: sglang reads SGLang's KV events (pages re-cut into --block-size blocks), sglang:* metrics and /tokenize; [,gpu=NAME][,tp=N][,profile=FILE]: its hardware in a mixed pool (delay-cost prices its tokens at its own speed); [,kv-offloading-size=GiB | ,cpu-kv-blocks=N]: its engine's CPU tier of KV, as the engine was given it (GiB, as vLLM's kv-offloading-size, or the OffloadingConnector's num_cpu_blocks in blocks of --block-size), modelled by --index approx (GiB in blocks of the catalog model its model= names, else llama-3.3-70b); [,kv-blocks=N]: its GPU pool, where --index approx forgets (default 34,882); the events index reads both tiers from the events; [,cache-ram-tokens=N | ,cache-ram=MIB,kv-bytes-per-token=B]: a llama-server's host prompt cache (its cache-ram setting, which it does not serve), for the router's slot model: in tokens (0: none), or in MiB with the KV bytes of a token (2 x n_layer x n_head_kv x head_dim x bytes per element); absent: routed on its slots alone";
const BACKENDS_KEY =
  "a list of `{url, events, replay, model, api-key, role, engine, topic, gpu, tp, profile, kv-offloading-size, cpu-kv-blocks, kv-blocks, cache-ram-tokens, cache-ram, kv-bytes-per-token}`: `--backend` (gpu, tp or profile: that backend's own speed for delay-cost; kv-offloading-size (GiB) or cpu-kv-blocks, and kv-blocks: its engine's CPU tier and GPU pool, for the approximate index; cache-ram-tokens, or cache-ram (MiB) with kv-bytes-per-token: a llama-server's host prompt cache, for the router's slot model)";

const SCORER_WEIGHTS_KEY =
  "`--scorer-weights`, as its text or a mapping `{prefix: W, kv: W, queue: W}` (the weights of an EndpointPickerConfig's scheduling profile)";
const PREFIX_CACHE_SCORER_KEY =
  "`--prefix-cache-scorer`, as its text or a mapping `{hashBlockSize: C, maxPrefixBlocksToMatch: N, lruCapacityPerServer: N}` (the `parameters` of an EndpointPickerConfig's prefix-cache-scorer)";

/** The NATS bounds, serve's and epp's. */
// biome-ignore format: one option a line
export const NATS_BOUNDS_OPTIONS = options({
  'nats-max-peers': int('N', 'peers held at once; one more is refused', { above: 0, default: DEFAULT_SYNC_LIMITS.maxPeers }),
  'nats-max-peer-entries': int('N', 'entries one peer may hold per model pool', { above: 0, default: DEFAULT_SYNC_LIMITS.maxEntriesPerPeer }),
  'nats-max-message-bytes': int('N', 'a larger message is dropped unread', { above: 0, default: DEFAULT_SYNC_LIMITS.maxMessageBytes, unit: 'bytes' }),
});

// biome-ignore format: one option a line
export const SERVE_OPTIONS = options({
  port: int('N', 'listen port; 0 picks a free one', { min: 0, max: 65535, default: DEFAULT_PORT, config: 'port' }),
  host: str('H', 'interface', { default: DEFAULT_HOST, config: 'host' }),
  backend: list('SPEC', BACKEND_SPEC, { config: 'backends', configDocs: BACKENDS_KEY }),
  'pd-threshold': int('N', "P/D: fewer uncached tokens than N on the decode replica run there alone (llm-d's prefix-based decider; default 0: always disaggregate)", { min: 0, unit: 'tokens', config: 'pd-threshold' }),
  config: str('FILE', 'YAML config (see kvroute.example.yaml); flags override it; read again on SIGHUP and when it changes (backends added start cold, removed ones drain)'),
  policy: oneOf(POLICY_NAMES, 'P', '{values}', { default: DEFAULT_POLICY, config: 'policy' }),
  index: oneOf(INDEX_MODES, 'M', "events (KV events over ZMQ) | approx (the router's own record)", { default: DEFAULT_INDEX, config: 'index' }),
  'kv-events-bind': str('EP', "bind one ZMQ SUB socket here (tcp://*:5557) for engines to connect their publishers to, as llm-d deploys it; a batch goes to the backend its topic kv@<pod-ip>@<model> names (the pod being the backend URL's host) or whose topic= key it is; other topics are counted, not indexed", { config: 'kv-events-bind' }),
  tokenizer: str('DIR', "a model folder (tokenizer.json, tokenizer_config.json, optional chat_template.jinja), as vLLM's --tokenizer; builtin: the simulated engines' cl100k_base", { default: DEFAULT_TOKENIZER, config: 'tokenizer' }),
  'chat-template': str('FILE', "a Jinja chat template, as vLLM's --chat-template (default: the tokenizer's own)", { config: 'chat-template' }),
  tokenize: oneOf(TOKENIZE_MODES, 'M', "local (tokenize here) | remote (each request through a backend's /tokenize: exact for any template, one more round trip)", { default: DEFAULT_TOKENIZE, config: 'tokenize' }),
  'stale-ms': num('N', 'exclude replicas whose last report is older', { above: 0, default: DEFAULT_STALE_MS, config: 'stale-ms' }),
  'kv-threshold': num('F', 'exclude replicas above this KV usage', { above: 0, max: 1, default: DEFAULT_KV_THRESHOLD, unit: 'fraction of the KV pool', config: 'kv-threshold' }),
  'scrape-ms': num('N', '/metrics scrape interval', { above: 0, default: DEFAULT_SCRAPE_MS, config: 'scrape-ms' }),
  'api-key': list('KEY[=TENANT]', 'require this client key, repeatable; its tenant salts the cache', { config: 'api-keys', configDocs: 'client keys, each with its tenant: `--api-key`' }),
  'admin-key': str('KEY', 'key for /router/replicas and /router/backends (closed to client keys once any is set); without it backends cannot be added or removed at run time (POST/DELETE /router/backends)', { nonEmpty: true, config: 'admin-key' }),
  'metrics-key': str('KEY', 'key for /metrics (the admin key works too; default: open, closed to all but the admin key once any --api-key is set)', { nonEmpty: true, config: 'metrics-key' }),
  'first-byte-timeout-ms': int('N', 'no response byte by then: retry on another replica and probe the silent one', { above: 0, default: DEFAULT_FIRST_BYTE_TIMEOUT_MS, config: 'first-byte-timeout-ms' }),
  'headers-timeout-ms': int('N', "a client's headers must arrive within this", { above: 0, default: DEFAULT_HEADERS_TIMEOUT_MS, config: 'headers-timeout-ms' }),
  'request-timeout-ms': int('N', 'and its whole request within this', { above: 0, default: DEFAULT_REQUEST_TIMEOUT_MS, config: 'request-timeout-ms' }),
  'log-level': oneOf(LOG_LEVELS, 'L', '{values} (default {default}); JSON lines on stderr, readable text when stderr is a terminal', { default: DEFAULT_LOG_LEVEL, config: 'log-level' }),
  'access-log': bool('one log line per request: tenant, model, replica, cached tokens, TTFT', { config: 'access-log' }),
  'expose-replica-addresses': bool("x-kvroute-replica and x-kvroute-prefill-replica give the replica's host:port (default: a label, replica-0, replica-1, ...)", { config: 'expose-replica-addresses', docs: ' ([security.md](security.md))' }),
  'block-size': int('N', 'tokens per KV block, as the engines use', { above: 0, default: DEFAULT_BLOCK_SIZE, config: 'block-size' }),
  replicas: int('N', 'embedded fleet size', { min: 1, max: 64, default: DEFAULT_EMBEDDED_REPLICAS, config: 'replicas', configDocs: '`--replicas` (the embedded fleet)' }),
  speedup: num('F', "embedded engines' modeled time / wall time", { above: 0, default: 1 }),
  seed: int('N', 'router seed: tie-breaks and the random policy (default {default}, as sim)', { min: 0, default: DEFAULT_ROUTER_SEED, config: 'seed' }),
  'decode-cost-tokens': num('C', 'delay-cost counts each running decode as C prompt tokens of step time in every step a request waits through (a CPU engine: tens; default: not counted, as on a GPU); kvroute calibrate --step-table prints C', { min: 0, unit: 'prompt tokens', config: 'decode-cost-tokens' }),
  'engine-budget': int('N', "the backends' tokens per step, for that term", { min: 1, default: 2048, unit: 'tokens per step', config: 'engine-budget' }),
  'scorer-weights': { ...L['scorer-weights'], config: 'scorer-weights', configDocs: SCORER_WEIGHTS_KEY },
  'prefix-cache-scorer': { ...L['prefix-cache-scorer'], config: 'prefix-cache-scorer', configDocs: PREFIX_CACHE_SCORER_KEY },
  'session-affinity': bool("keep a conversation on the replica it used last while that one's cost is within --session-slack-tokens of the best (for engines whose cache the router cannot see); the key: the --session-header header, else the body's session_id, else its user", { config: 'session-affinity', configDocs: '`--session-affinity` (true/false; any other `session-*` key turns it on)', docs: ' ([routing.md](routing.md#session-affinity))' }),
  'session-header': str('NAME', "the session key's header (default {default}); implies --session-affinity", { default: DEFAULT_SESSION_HEADER, config: 'session-header' }),
  'session-slack-tokens': num('N', 'prompt tokens of extra queue a session accepts to stay', { min: 0, default: DEFAULT_SESSION_SLACK_TOKENS, config: 'session-slack-tokens' }),
  'session-max': int('N', 'sessions remembered per model, least recently used forgotten first', { min: 1, default: DEFAULT_SESSION_CAPACITY, config: 'session-max' }),
  ...RUNTIME_OPTIONS,
  planner: bool('replay the live traffic of the last --planner-window-s on the simulator every --planner-interval-s and export the fewest replicas meeting the SLO: gauge kvroute_planner_desired_replicas{pool}, GET /planner/desired (KEDA metrics-api, valueLocation desiredReplicas), a log line on change', { section: 'online planner (docs/planner.md#online)', config: 'planner', configDocs: '`--planner` (true/false; any other `planner-*` key turns it on)', docs: ' ([planner.md](planner.md#online))' }),
  'planner-window-s': num('S', 'the traffic window fitted', { above: 0, default: DEFAULT_PLANNER_WINDOW_S, config: 'planner-window-s' }),
  'planner-interval-s': num('S', 'how often the search runs', { above: 0, default: DEFAULT_PLANNER_INTERVAL_S, config: 'planner-interval-s' }),
  'planner-scale-down-s': num('S', 'a lower answer must hold this long before the count goes down (default {default}); an answer above it applies at once', { min: 0, default: DEFAULT_PLANNER_SCALE_DOWN_S, config: 'planner-scale-down-s' }),
  'planner-profile': str('FILE', "the engines' calibrated profile (kvroute calibrate; default: the catalog's model, as kvroute sim)", { nonEmpty: true, config: 'planner-profile' }),
  'planner-slo-ttft-p99-ms': num('MS', "the SLO's TTFT p99 (default: kvroute sim's)", { above: 0, config: 'planner-slo-ttft-p99-ms' }),
  'planner-slo-tpot-p99-ms': num('MS', "the SLO's TPOT p99 (default: kvroute sim's)", { above: 0, config: 'planner-slo-tpot-p99-ms' }),
  'planner-slo-ttft-slowdown': num('X', "instead of a fixed TTFT: p99 of TTFT / the request's own cold TTFT at most X (prompts whose prefill alone outlasts a fixed target)", { min: 1, config: 'planner-slo-ttft-slowdown' }),
  'planner-max-replicas': int('N', 'most replicas tried; the answer when none meets the SLO', { above: 0, default: DEFAULT_PLANNER_MAX_REPLICAS, config: 'planner-max-replicas' }),
  'planner-fast-window-s': num('S', 'also search the last S seconds of the window alone and take the larger answer: a rise in the rate is acted on before it fills the window (0: off)', { min: 0, default: DEFAULT_PLANNER_FAST_WINDOW_S, config: 'planner-fast-window-s' }),
  'max-queue-ms': num('N', '429 while every eligible replica has more than N ms of modelled prefill queued (default: no bound)', { above: 0, section: "admission (per-tenant limits and priority classes: the config file's tenants, see docs/routing.md)", config: 'max-queue-ms' }),
  'max-ttft-ms': num('N', "429 when the request's modelled TTFT on the replica it was routed to (prefill queued there + its own uncached prefill) is over N ms", { above: 0, config: 'max-ttft-ms' }),
  'prefill-us-per-token': num('F', "the served model's prefill cost for that bound (default {default}, the seed replica)", { above: 0, default: DEFAULT_PREFILL_US_PER_TOKEN.toFixed(1), unit: 'µs per token', config: 'prefill-us-per-token' }),
  'check-config': str('FILE', 'validate FILE (with the other flags) and exit: 0 valid, 2 not'),
  ...FLOW_OPTIONS,
  'flow-control': { ...FLOW_OPTIONS['flow-control'], config: 'flow-control', configDocs: '`{enabled, max-queued, max-queued-per-tenant, max-wait-ms, release, owner-slack-tokens, owner-hold-ms, look-ahead, owner-pass-ms, finish-first, charge, saturation: {queue-depth, kv-usage, queued-prefill-ms}}`: `--flow-control` and the `--flow-*` flags ([flow-control.md](flow-control.md#in-the-gateway))' },
  nats: str('URL', "share routing state with the cluster's other gateways over NATS (nats://HOST:4222): every decision and release, so each sees every replica's whole queue; with no --backend, follow the engines registered there (kvroute engine --nats URL --advertise URL)", { nonEmpty: true, section: 'several gateways (see docs/nats.md)' }),
  cluster: str('NAME', 'gateways and engines of one cluster share state', { default: DEFAULT_CLUSTER }),
  'nats-heartbeat-ms': int('N', 'heartbeat period', { above: 0, default: DEFAULT_HEARTBEAT_MS }),
  'nats-peer-timeout-ms': int('N', 'a peer silent this long has its in-flight entries dropped', { above: 0, default: DEFAULT_PEER_TIMEOUT_MS }),
  ...NATS_AUTH_OPTIONS,
  ...NATS_BOUNDS_OPTIONS,
  'discovery-allow': str('LIST', 'engines taken from discovery only at these addresses, comma-separated: CIDRs (10.0.0.0/8), IPs, host names, *.suffix (default: any; set it)'),
  'discovery-max-backends': int('N', 'most engines taken from discovery', { above: 0, default: DEFAULT_MAX_DISCOVERED_BACKENDS }),
  models: configOnly('models', 'per base model: `{tokenizer, chat-template}`, for a fleet serving several models'),
  'body-limit-bytes': configOnly('body-limit-bytes', 'the largest request body accepted (413 above)'),
  'max-retries': configOnly('max-retries', 'other replicas tried when one refuses or resets before any byte is sent'),
  tenants: configOnly('tenants', 'per tenant: its salt, `priority-class`, `limits` (requests-per-second, burst, concurrent-requests, prompt-tokens-per-minute) and `flow-weight` (its share of tokens in the flow-control queue, default 1)'),
  'priority-classes': configOnly('priority-classes', 'class name to vLLM `priority` value, e.g. `{interactive: 0, batch: 10}`'),
});

/** The config file's keys (`src/serving/config.ts` refuses any other). */
export const SERVE_CONFIG_KEYS: ReadonlySet<string> = new Set(configKeysOf(SERVE_OPTIONS));
