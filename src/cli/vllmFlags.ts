/**
 * `vllm serve`'s command line for `kvroute engine`, so a vLLM launch line runs unchanged with the
 * binary swapped. `translateVllmArgs` rewrites vLLM's spellings into kvroute's flags before the
 * ordinary parser sees them (kvroute's own names keep working, and win where both exist):
 * - the positional model tag (vLLM's `model_tag`) or `--model`, mapped onto the catalog
 *   (`meta-llama/Llama-3.3-70B-Instruct` -> `llama-3.3-70b`); a name the catalog lacks is served
 *   as given, simulated as `--sim-model` (default: the engine default), with a warning;
 * - renamed flags: `--tensor-parallel-size`/`-tp`, `--max-num-seqs`, `--max-num-batched-tokens`
 *   (vLLM's human-readable ints: 2k = 2000, 2K = 2048), `--num-gpu-blocks-override`,
 *   `--max-model-len` (also `auto`/-1: the model's), `--served-model-name` with several names;
 * - `--kv-events-config` JSON (or `--kv-events-config.FIELD=VALUE`), vLLM's KVEventsConfig fields;
 * - LoRA: `--enable-lora`/`--no-enable-lora`, `--lora-modules` (several values, each becoming one
 *   kvroute `--lora-modules`), `--max-loras`, `--max-cpu-loras`, `--max-lora-rank` (kvroute's own
 *   names, the same meaning);
 * - vLLM flags that change nothing in a simulation (logging, loaders, compilation, ...): accepted,
 *   named in one warning line. A flag neither kvroute nor vLLM has stays an error naming it.
 * Flags the tables below do not list as vLLM's are passed to the ordinary parser untouched.
 */
import { MODELS } from '../model/catalog.ts';
import { parseJsonOr } from '../util/json.ts';
import { type FlagSpec, UsageError } from './args.ts';

/** vLLM flags kvroute reads under its own name. */
const RENAMED: Readonly<Record<string, string>> = {
  'tensor-parallel-size': 'tp',
  'max-num-seqs': 'max-seqs',
  'max-num-batched-tokens': 'budget',
  'num-gpu-blocks-override': 'kv-blocks',
  // GiB of CPU KV (CacheConfig.kv_offloading_size; the native backend's OffloadingConnector).
  'kv-offloading-size': 'cpu-kv-gib',
};

/** vLLM's short forms (argparse takes them with one dash). */
const SHORT: Readonly<Record<string, string>> = {
  tp: 'tensor-parallel-size',
  pp: 'pipeline-parallel-size',
  dp: 'data-parallel-size',
  dpn: 'data-parallel-rank',
  dpr: 'data-parallel-start-rank',
  dpl: 'data-parallel-size-local',
  dpa: 'data-parallel-address',
  dpp: 'data-parallel-rpc-port',
  dpb: 'data-parallel-backend',
  dph: 'data-parallel-hybrid-lb',
  dpe: 'data-parallel-external-lb',
  ep: 'enable-expert-parallel',
  q: 'quantization',
  O: 'compilation-config',
  cc: 'compilation-config',
  ac: 'attention-config',
  asc: 'api-server-count',
};

/** vLLM flags taking one value that change nothing in the simulation. */
const IGNORED_VALUE_FLAGS = new Set(
  (
    'tokenizer tokenizer-mode tokenizer-revision revision code-revision download-dir load-format ' +
    'config-format dtype quantization logprobs-mode distributed-executor-backend worker-cls ' +
    'swap-space cpu-offload-gb kv-cache-memory-bytes max-num-partial-prefills ' +
    'max-long-partial-prefills long-prefill-token-threshold scheduling-policy scheduler-cls ' +
    'compilation-config attention-config speculative-config kv-transfer-config hf-overrides ' +
    'override-generation-config generation-config chat-template chat-template-content-format ' +
    'response-role tool-parser-plugin reasoning-parser max-log-len root-path ' +
    'uvicorn-log-level api-server-count config prefix-caching-hash-algo ' +
    'limit-mm-per-prompt mm-processor-kwargs max-seq-len-to-capture max-cudagraph-capture-size ' +
    'stream-interval model-impl lora-dtype ' +
    'data-parallel-rank data-parallel-start-rank data-parallel-size-local data-parallel-address ' +
    'data-parallel-rpc-port data-parallel-backend kv-offloading-backend ' +
    'show-hidden-metrics-for-version kv-cache-metrics-sample otlp-traces-endpoint ' +
    'collect-detailed-traces uds hf-config-path hf-token default-chat-template-kwargs ' +
    'override-pooler-config pooler-config structured-outputs-config guided-decoding-backend ' +
    'max-parallel-loading-workers'
  ).split(' '),
);

/** vLLM flags taking one or more values (argparse nargs="+") that change nothing here. */
const IGNORED_LIST_FLAGS = new Set(['default-mm-loras']);

/**
 * vLLM flags that change who may call the server, which kvroute does not implement: refused
 * with one line rather than ignored (a launch line swapped to kvroute must not lose them).
 * `--api-key` is implemented (engine/server/auth.ts); `--root-path` only moves the paths (an
 * ignored one leaves /v1 where the key check looks for it).
 */
const REFUSED_FLAGS: Readonly<Record<string, string>> = {
  'ssl-keyfile': 'kvroute engine serves plain HTTP; terminate TLS in front of it',
  'ssl-certfile': 'kvroute engine serves plain HTTP; terminate TLS in front of it',
  'ssl-ca-certs':
    'kvroute engine serves plain HTTP (no client certificates); terminate TLS in front of it',
  'ssl-cert-reqs':
    'kvroute engine serves plain HTTP (no client certificates); terminate TLS in front of it',
  'allowed-origins':
    'kvroute engine sends no CORS headers (no browser origin may read it); drop the flag or put a proxy in front',
  'allowed-methods': 'kvroute engine sends no CORS headers; drop the flag or put a proxy in front',
  'allowed-headers': 'kvroute engine sends no CORS headers; drop the flag or put a proxy in front',
  'allow-credentials':
    'kvroute engine sends no CORS headers; drop the flag or put a proxy in front',
  middleware: 'kvroute engine runs no ASGI middleware; put what it checks in front of the engine',
  uds: 'kvroute engine listens on TCP only (--host, --port)',
};

/** vLLM's boolean flags (each also as --no-NAME) that change nothing in the simulation. */
const IGNORED_BOOLEAN_FLAGS = new Set(
  (
    'trust-remote-code enforce-eager enable-chunked-prefill async-scheduling disable-log-stats ' +
    'enable-log-requests disable-log-requests disable-uvicorn-access-log ' +
    'fully-sharded-loras enable-prompt-tokens-details enable-force-include-usage ' +
    'enable-tokenizer-info-endpoint enable-request-id-headers enable-log-outputs ' +
    'disable-fastapi-docs trust-request-chat-template exclude-tools-when-tool-choice-none ' +
    'enable-expert-parallel headless skip-tokenizer-init enable-sleep-mode calculate-kv-scales ' +
    'disable-cascade-attn disable-custom-all-reduce kv-cache-metrics data-parallel-hybrid-lb ' +
    'data-parallel-external-lb enable-eplb disable-sliding-window use-tqdm-on-load ' +
    'return-tokens-as-token-ids enable-server-load-tracking'
  ).split(' '),
);

/** vLLM booleans kvroute models: --NAME / --no-NAME. */
const MODELED_BOOLEAN_FLAGS = new Set([
  'enable-prefix-caching',
  'enable-auto-tool-choice',
  'enable-lora',
]);

/** vLLM's KVEventsConfig fields (vllm/config/kv_events.py). */
const KV_EVENTS_FIELDS = new Set([
  'enable_kv_cache_events',
  'publisher',
  'endpoint',
  'replay_endpoint',
  'buffer_steps',
  'hwm',
  'max_queue_size',
  'topic',
]);

export interface VllmTranslation {
  /** kvroute's argv. */
  args: string[];
  /** One warning line each (ignored flags, the model chosen for an unknown name), or none. */
  warnings: string[];
}

/** The catalog model a model tag names: org stripped, case folded, a catalog name as prefix. */
export function catalogModelOf(tag: string): string | null {
  if (Object.hasOwn(MODELS, tag)) return tag;
  const name = (tag.split('/').at(-1) ?? tag).toLowerCase().replace(/^meta-/, '');
  for (const model of Object.keys(MODELS)) {
    if (name === model || name.startsWith(`${model}-`)) return model;
  }
  return null;
}

/** vLLM's `human_readable_int`: 25.6k = 25600, 1K = 1024 (uppercase: powers of 1024). */
export function humanReadableInt(flag: string, raw: string): string {
  const m = /^(\d+(?:\.\d+)?)([kKmMgGtT])$/.exec(raw.trim());
  if (!m) return raw;
  const power = 'kmgt'.indexOf(m[2]!.toLowerCase()) + 1;
  const binary = m[2] === m[2]!.toUpperCase();
  if (binary && m[1]!.includes('.')) {
    throw new UsageError(
      `--${flag}: the binary multiplier ${m[2]} takes whole numbers, got ${raw}`,
    );
  }
  const value = Number(m[1]) * (binary ? 1024 : 1000) ** power;
  if (!Number.isInteger(value))
    throw new UsageError(`--${flag} must be a whole number, got ${raw}`);
  return String(value);
}

/** `--kv-events-config` into kvroute's event flags, as vLLM's EventPublisherFactory reads it. */
function kvEventsArgs(config: Record<string, unknown>, warnings: string[]): string[] {
  const unknown = Object.keys(config).filter((k) => !KV_EVENTS_FIELDS.has(k));
  if (unknown.length > 0) {
    warnings.push(`ignoring unknown --kv-events-config fields: ${unknown.join(', ')}`);
  }
  const enabled = config.enable_kv_cache_events ?? false;
  if (typeof enabled !== 'boolean') {
    throw new UsageError('--kv-events-config: enable_kv_cache_events must be true or false');
  }
  const publisher = config.publisher ?? (enabled ? 'zmq' : 'null');
  if (publisher !== 'zmq' && publisher !== 'null') {
    throw new UsageError(
      `--kv-events-config: Unknown event publisher '${String(publisher)}' (zmq, null)`,
    );
  }
  if (!enabled || publisher === 'null') return [];
  const str = (field: string, fallback: string | null): string | null => {
    const v = config[field] ?? fallback;
    if (v !== null && typeof v !== 'string') {
      throw new UsageError(`--kv-events-config: ${field} must be a string`);
    }
    return v;
  };
  const out = ['--kv-events', str('endpoint', 'tcp://*:5557')!];
  const replay = str('replay_endpoint', null);
  if (replay) out.push('--kv-replay', replay);
  const topic = str('topic', '');
  if (topic) out.push('--kv-events-topic', topic);
  if (config.buffer_steps !== undefined) {
    out.push('--kv-replay-buffer', String(config.buffer_steps));
  }
  return out;
}

/** A `--kv-events-config.FIELD=VALUE` value: JSON where it parses, a string otherwise. */
function dottedValue(raw: string): unknown {
  return parseJsonOr(raw, raw);
}

/**
 * Rewrites a `vllm serve` argument list into kvroute engine flags. `kvroute` is the engine's own
 * flag spec: its names pass through untouched.
 */
export function translateVllmArgs(argv: readonly string[], kvroute: FlagSpec): VllmTranslation {
  const walk: VllmWalk = {
    args: [],
    ignored: [],
    warnings: [],
    modelTag: null,
    simModel: null,
    servedNames: [],
    kvEvents: null,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('-') || arg === '-') {
      if (walk.modelTag !== null) throw new UsageError(`unexpected argument '${arg}'`);
      walk.modelTag = arg;
      continue;
    }
    const long = arg.startsWith('--');
    const [rawName, inline] = splitInline(long ? arg.slice(2) : arg.slice(1));
    const name = long ? rawName : SHORT[rawName];
    if (name === undefined) {
      walk.args.push(arg); // a short flag of kvroute's (-h), or an error for the parser
      continue;
    }
    const flag = new VllmFlag(argv, i, name, inline);
    translateFlag(walk, flag, kvroute);
    i = flag.at;
  }
  return finishTranslation(walk);
}

/** What the walk over a vLLM argument list has gathered so far. */
interface VllmWalk {
  /** kvroute's argv, as far as it is known. */
  args: string[];
  /** vLLM flags accepted and dropped (one warning names them all). */
  ignored: string[];
  warnings: string[];
  modelTag: string | null;
  simModel: string | null;
  servedNames: string[];
  /** `--kv-events-config` and its dotted fields, merged; null: not given. */
  kvEvents: Record<string, unknown> | null;
}

/** One vLLM flag in its argument list: its name, inline value, and the values after it. */
class VllmFlag {
  /** The argument as given. */
  readonly arg: string;

  constructor(
    readonly argv: readonly string[],
    /** The index of the last argument this flag has taken. */
    public at: number,
    readonly name: string,
    readonly inline: string | undefined,
  ) {
    this.arg = argv[at]!;
  }

  /** The flag's value: inline, else the next argument. */
  value(): string {
    if (this.inline !== undefined) return this.inline;
    const next = this.argv[this.at + 1];
    if (next === undefined) throw new UsageError(`--${this.name} takes a value`);
    this.at++;
    return next;
  }

  /** Values up to the next flag (argparse nargs="+"). */
  values(): string[] {
    const out = this.inline !== undefined ? [this.inline] : [];
    while (this.argv[this.at + 1] !== undefined && !this.argv[this.at + 1]!.startsWith('-')) {
      out.push(this.argv[++this.at]!);
    }
    if (out.length === 0) throw new UsageError(`--${this.name} takes at least one value`);
    return out;
  }
}

/** One flag into the walk, by the first of these readers that knows it. */
function translateFlag(walk: VllmWalk, flag: VllmFlag, kvroute: FlagSpec): void {
  if (readModelFlag(walk, flag)) return;
  const base = flag.name.replace(/^no-/, '');
  if (Object.hasOwn(REFUSED_FLAGS, base)) {
    throw new UsageError(`--${flag.name} is not supported: ${REFUSED_FLAGS[base]}`);
  }
  if (readConfigFlag(walk, flag)) return;
  if (readSizeFlag(walk.args, flag)) return;
  readOtherFlag(walk, flag, kvroute);
}

/** The model and who may call it: --model, --sim-model, --served-model-name, --api-key. */
function readModelFlag(walk: VllmWalk, flag: VllmFlag): boolean {
  switch (flag.name) {
    case 'model':
      walk.modelTag = flag.value();
      return true;
    case 'sim-model': {
      const simModel = flag.value();
      if (!Object.hasOwn(MODELS, simModel)) {
        throw new UsageError(
          `--sim-model must be one of ${Object.keys(MODELS).join(', ')}; got '${simModel}'`,
        );
      }
      walk.simModel = simModel;
      return true;
    }
    case 'served-model-name':
      walk.servedNames.push(...flag.values());
      return true;
    case 'api-key':
      // argparse nargs="+" in vLLM: one kvroute flag per key.
      for (const key of flag.values()) walk.args.push('--api-key', key);
      return true;
    default:
      return false;
  }
}

/** LoRA modules, `--kv-events-config` and the dotted config forms. */
function readConfigFlag(walk: VllmWalk, flag: VllmFlag): boolean {
  const { name } = flag;
  if (name === 'lora-modules') {
    // argparse nargs="+": one kvroute flag per module.
    for (const module of flag.values()) walk.args.push('--lora-modules', module);
  } else if (name === 'kv-events-config') {
    const raw = flag.value();
    const parsed = dottedValue(raw);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      throw new UsageError(`--kv-events-config must be a JSON object, got '${raw}'`);
    }
    walk.kvEvents = { ...(walk.kvEvents ?? {}), ...(parsed as Record<string, unknown>) };
  } else if (name.startsWith('kv-events-config.')) {
    const field = name.slice('kv-events-config.'.length).replaceAll('-', '_');
    walk.kvEvents = { ...(walk.kvEvents ?? {}), [field]: dottedValue(flag.value()) };
  } else if (name.startsWith('kv-transfer-config.')) {
    // vLLM's dotted config form: one kvroute flag per field, read by the engine.
    const field = name.slice('kv-transfer-config.'.length);
    walk.args.push('--kv-transfer-config-part', `${field}=${flag.value()}`);
  } else return false;
  return true;
}

/** Sizes: --max-model-len, the renamed flags, and the parallel sizes kvroute takes only as 1. */
function readSizeFlag(args: string[], flag: VllmFlag): boolean {
  const { name } = flag;
  if (name === 'max-model-len') {
    const raw = flag.value();
    if (raw !== 'auto' && raw !== '-1') args.push('--max-model-len', humanReadableInt(name, raw));
  } else if (Object.hasOwn(RENAMED, name)) {
    const raw = flag.value();
    args.push(
      `--${RENAMED[name]}`,
      name === 'max-num-batched-tokens' ? humanReadableInt(name, raw) : raw,
    );
  } else if (name === 'pipeline-parallel-size' || name === 'data-parallel-size') {
    const raw = flag.value();
    if (raw !== '1') {
      throw new UsageError(
        `--${name} ${raw} is not supported: one kvroute engine is one replica (run one per rank)`,
      );
    }
  } else return false;
  return true;
}

/** kvroute's own flags, the booleans it models, the vLLM flags it ignores, and the unknown. */
function readOtherFlag(walk: VllmWalk, flag: VllmFlag, kvroute: FlagSpec): void {
  const { name, inline, argv, arg } = flag;
  if (Object.hasOwn(kvroute, name)) {
    walk.args.push(arg);
    if (
      kvroute[name]!.type === 'string' &&
      inline === undefined &&
      argv[flag.at + 1] !== undefined
    ) {
      walk.args.push(argv[++flag.at]!);
    }
  } else if (MODELED_BOOLEAN_FLAGS.has(name.replace(/^no-/, ''))) {
    if (inline !== undefined) throw new UsageError(`--${name} takes no value`);
    walk.args.push(`--${name}`);
  } else if (IGNORED_VALUE_FLAGS.has(name)) {
    flag.value();
    walk.ignored.push(`--${name}`);
  } else if (IGNORED_LIST_FLAGS.has(name)) {
    flag.values();
    walk.ignored.push(`--${name}`);
  } else if (IGNORED_BOOLEAN_FLAGS.has(name.replace(/^no-/, ''))) {
    walk.ignored.push(`--${name}`);
  } else walk.args.push(arg); // not vLLM's: the parser names it as unknown
}

/** The walk's model, served names and KV events as kvroute flags, and its warnings. */
function finishTranslation(walk: VllmWalk): VllmTranslation {
  const { args, warnings, modelTag, servedNames } = walk;
  // The catalog model: --sim-model, else the one the tag names; the tag is the served name.
  const model = walk.simModel ?? (modelTag === null ? null : catalogModelOf(modelTag));
  if (model !== null) args.push('--model', model);
  else if (modelTag !== null) {
    warnings.push(
      `'${modelTag}' is not in the catalog (${Object.keys(MODELS).join(', ')}); simulating the default model (choose one with --sim-model)`,
    );
  }
  if (modelTag !== null && servedNames.length === 0) servedNames.push(modelTag);
  if (servedNames.length > 0) {
    args.push('--served-model-name', servedNames[0]!);
    for (const alias of servedNames.slice(1)) args.push('--served-model-alias', alias);
  }
  if (walk.kvEvents !== null) {
    if (args.includes('--kv-events') || args.includes('--kv-replay')) {
      throw new UsageError('use either --kv-events-config or --kv-events/--kv-replay, not both');
    }
    args.push(...kvEventsArgs(walk.kvEvents, warnings));
  }
  if (walk.ignored.length > 0) {
    warnings.unshift(
      `ignoring vLLM flags that do not change the simulation: ${walk.ignored.join(' ')}`,
    );
  }
  return { args, warnings };
}

function splitInline(flag: string): [string, string | undefined] {
  const eq = flag.indexOf('=');
  return eq < 0 ? [flag, undefined] : [flag.slice(0, eq), flag.slice(eq + 1)];
}
