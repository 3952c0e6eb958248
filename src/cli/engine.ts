/**
 * `kvroute engine`: one simulated vLLM-compatible engine server. Takes kvroute's flags and
 * `vllm serve`'s (vllmFlags.ts rewrites those first). Prints one ready line,
 *   kvroute engine ready url=http://127.0.0.1:8001 model=llama-3.3-70b events=tcp://... replay=-
 * that parents and tests parse, then serves until SIGINT or SIGTERM.
 */
import {
  cpuTierSpec,
  type KvTransferConfig,
  KvTransferConfigError,
  parseKvTransferConfig,
} from '../engine/connector/kvTransferConfig.ts';
import { DEFAULT_TRANSFER_GBPS, DEFAULT_TRANSFER_LATENCY_MS } from '../engine/connector/nixl.ts';
import { ENGINE_DEFAULTS } from '../engine/options.ts';
import { type LoraModule, runtimeLoraUpdatingFromEnv } from '../engine/server/adapters.ts';
import { apiKeysOf } from '../engine/server/auth.ts';
import {
  type EngineServerOptions,
  RUNTIME_NAMES,
  SERVER_DEFAULTS,
} from '../engine/server/options.ts';
import {
  LLAMA_CPP_DEFAULT_MAX_SEQS,
  LLAMA_CPP_DEFAULT_THREADS,
} from '../engine/runtime/llamaCpp/serve.ts';
import { startEngineServer } from '../engine/server/server.ts';
import { DEFAULT_STREAM_LIMITS } from '../engine/server/streamWriter.ts';
import { DEFAULT_MAX_LOGPROBS } from '../engine/server/validation.ts';
import { REPLAY_FORMS, WIRE_FORMATS } from '../kv/wire.ts';
import { DEFAULT_MEMORY_UTILIZATION } from '../model/cost.ts';
import { type Flags, flagSpec, printHelp, readFlags, UsageError } from './args.ts';
import {
  ENGINE_CHAT_FAULT_HELP,
  ENGINE_FAULT_FLAGS,
  ENGINE_FAULT_HELP,
  readEngineFaultFlags,
} from './engineFaultFlags.ts';
import { ENGINE_FLAGS, ENGINE_HELP, readEngineFlags } from './engineFlags.ts';
import { readRuntimeChoice } from './runtimeFlags.ts';
import {
  openSideChannelWarning,
  readTransferSecurityFlags,
  TRANSFER_SECURITY_BOOLEAN_FLAGS,
  TRANSFER_SECURITY_FLAGS,
  TRANSFER_SECURITY_HELP,
} from './engineTransferSecurity.ts';
import { serveUntilSignal } from './untilSignal.ts';
import { translateVllmArgs } from './vllmFlags.ts';
import { DEFAULT_ENGINE_TTL_MS, type Registration, registerEngine } from '../sync/discovery.ts';
import type { NatsAuth } from '../sync/natsAuth.ts';
import { NATS_AUTH_FLAG_NAMES, NATS_AUTH_HELP, readNatsAuth } from './natsFlags.ts';
import { DEFAULT_CLUSTER, isClusterName } from '../sync/subjects.ts';

export const FLAGS = flagSpec({
  string:
    'host port served-model-name max-model-len speedup seed tokenizer chat-template ' +
    'kv-events kv-replay kv-events-format kv-events-topic kv-replay-form kv-replay-buffer ' +
    'gpu-memory-utilization kv-cache-dtype max-logprobs tool-call-parser ' +
    'headers-timeout-ms request-timeout-ms stream-buffer-limit-bytes stream-stall-timeout-ms ' +
    `nats advertise cluster ${NATS_AUTH_FLAG_NAMES} kv-transfer-config kv-transfer-gbps kv-transfer-latency-ms ` +
    `runtime gguf threads ${TRANSFER_SECURITY_FLAGS}`,
  multiple: 'served-model-alias lora-modules kv-transfer-config-part api-key',
  boolean:
    'enable-prefix-caching no-enable-prefix-caching enable-auto-tool-choice ' +
    'no-enable-auto-tool-choice enable-lora no-enable-lora allow-runtime-lora-updating ' +
    TRANSFER_SECURITY_BOOLEAN_FLAGS,
});

/** vLLM's --kv-cache-dtype values: `auto` is the model's dtype (BF16 here), the rest FP8. */
const KV_CACHE_DTYPES = ['auto', 'bfloat16', 'fp8', 'fp8_e4m3', 'fp8_e5m2'] as const;

const DEFAULT_PORT = 8001;

const HELP = `usage: kvroute engine [MODEL] [flags]

A simulated vLLM-compatible engine: OpenAI API (/v1/completions, /v1/chat/completions,
/v1/models, /tokenize, /detokenize, /health), Prometheus /metrics with vLLM's names, KV cache
events over ZMQ in vLLM's wire format. Each engine step sleeps its modeled duration / --speedup.

A \`vllm serve\` command line works unchanged: MODEL (or --model) maps onto the catalog
(meta-llama/Llama-3.3-70B-Instruct -> llama-3.3-70b) and is the served name; vLLM's names
--tensor-parallel-size/-tp, --max-num-seqs, --max-num-batched-tokens, --num-gpu-blocks-override
stand for --tp, --max-seqs, --budget, --kv-blocks; --served-model-name takes several names;
--kv-events-config takes vLLM's JSON; vLLM flags that change nothing here are accepted with one
warning line; those that change who may call it and that kvroute lacks (--ssl-*, CORS, --uds,
--middleware) are refused.

runtime
  --runtime R           ${RUNTIME_NAMES.join(' | ')} (default sim: the cost model's clock and simulated
                        text; llama.cpp: real forward passes on the CPU through node-llama-cpp)
  --gguf FILE           the model llama.cpp runs (needs --runtime llama.cpp); its tokenizer and
                        chat template serve the prompts and /tokenize (kvroute model tiny writes one)
  --threads N           CPU threads per forward pass (llama.cpp; default ${LLAMA_CPP_DEFAULT_THREADS})
                        With llama.cpp, --max-seqs defaults to ${LLAMA_CPP_DEFAULT_MAX_SEQS} and as many idle
                        sequences keep KV as a prefix cache; --max-model-len defaults to the model's.
server
  --host H              interface (default ${SERVER_DEFAULTS.host})
  --port N              port; 0 picks a free one (default ${DEFAULT_PORT})
  --served-model-name S name clients send as "model" (default: MODEL)
  --api-key KEY...      /v1 paths need Authorization: Bearer KEY (one of several), else 401
                        {"error": "Unauthorized"}, as vLLM; default: VLLM_API_KEY, else open.
                        /health, /metrics, /tokenize, /detokenize stay open, as in vLLM;
                        the first key is also the P/D side channel's secret by default
  --sim-model NAME      catalog model to simulate, one of --model's (default: the one MODEL
                        names, else ${ENGINE_DEFAULTS.model})
  --max-model-len N     context window (default: the model's)
  --gpu-memory-utilization F  fraction of GPU memory for weights and KV (default ${DEFAULT_MEMORY_UTILIZATION})
  --kv-cache-dtype T    ${KV_CACHE_DTYPES.join(' | ')} (default auto: BF16)
  --enable-prefix-caching / --no-enable-prefix-caching  (default on)
  --max-logprobs N      most log-probabilities per token (default ${DEFAULT_MAX_LOGPROBS})
  --enable-auto-tool-choice, --tool-call-parser NAME  serve tool_choice "auto" (the simulated
                        model answers in text; it never calls a tool)
  --speedup F           modeled time / wall time (default ${SERVER_DEFAULTS.speedup})
  --seed N              seeds the generated text (default ${SERVER_DEFAULTS.seed})
  --headers-timeout-ms N  a client's request head must arrive within this (default ${SERVER_DEFAULTS.headersTimeoutMs})
  --request-timeout-ms N  and its whole request within this (default ${SERVER_DEFAULTS.requestTimeoutMs})
  --stream-buffer-limit-bytes N  a stream whose client does not read is aborted (its KV freed)
                        past this many waiting bytes (default ${DEFAULT_STREAM_LIMITS.limitBytes})
  --stream-stall-timeout-ms N  or this long without the client draining (default ${DEFAULT_STREAM_LIMITS.stallMs})
  --tokenizer DIR       a model folder (tokenizer.json, tokenizer_config.json, optional
                        chat_template.jinja), as vLLM's --tokenizer (default: builtin cl100k_base)
  --chat-template FILE  a Jinja chat template, as vLLM's --chat-template (default: the
                        tokenizer's own)
${ENGINE_HELP}${ENGINE_FAULT_HELP}${ENGINE_CHAT_FAULT_HELP}LoRA adapters (a request whose "model" names an adapter runs with it)
  --enable-lora / --no-enable-lora  serve LoRA adapters (default off, as vLLM); the limits are
                        --max-loras, --max-cpu-loras, --max-lora-rank, --lora-load-gbps above
  --lora-modules M...   adapters loaded at start: name=path, or vLLM's JSON
                        '{"name": "sql", "path": "/adapters/sql", "base_model_name": "..."}'
  --allow-runtime-lora-updating  serve POST /v1/load_lora_adapter and /v1/unload_lora_adapter
                        (vLLM serves them when VLLM_ALLOW_RUNTIME_LORA_UPDATING is 1 or true,
                        which this engine also reads)
disaggregated prefill and decode (vLLM's NixlConnector, modelled)
  --kv-transfer-config J  vLLM's JSON, e.g. '{"kv_connector":"NixlConnector","kv_role":"kv_both"}',
                        or dotted: --kv-transfer-config.kv_connector=NixlConnector ...; then a
                        request with kv_transfer_params takes part in vLLM's P/D protocol
                        '{"kv_connector":"OffloadingConnector","kv_role":"kv_both",
                        "kv_connector_extra_config":{"num_cpu_blocks":N}}' (or cpu_bytes_to_use)
                        gives the engine a CPU tier, as --cpu-kv-gib / vLLM's --kv-offloading-size
  --kv-transfer-gbps F  modelled KV link for pulls, GB/s (default ${DEFAULT_TRANSFER_GBPS})
  --kv-transfer-latency-ms F  modelled latency per pull (default ${DEFAULT_TRANSFER_LATENCY_MS})
                        (VLLM_NIXL_ABORT_REQUEST_TIMEOUT, seconds, frees unpulled blocks; default 480)
${TRANSFER_SECURITY_HELP}
KV events
  --kv-events-config J  vLLM's JSON: {"enable_kv_cache_events": true, "publisher": "zmq",
                        "endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:5558", "topic": ""}
  --kv-events EP        ZMQ PUB endpoint, e.g. tcp://*:5557 (default: off, as vLLM)
  --kv-replay EP        ZMQ ROUTER replay endpoint, e.g. tcp://*:5558
  --kv-events-format F  ${WIRE_FORMATS.join(' | ')} (default ${SERVER_DEFAULTS.kvEventsFormat}: vLLM >= 0.26; array: older)
  --kv-replay-form F    ${REPLAY_FORMS.join(' | ')} (default: topic with map events, as vLLM >= 0.26;
                        no-topic with array events, as older vLLM and SGLang)
  --kv-events-topic T   topic frame (default empty)
  --kv-replay-buffer N  batches kept for replay (vLLM's buffer_steps, default 10000)
discovery (gateways started with --nats and no --backend follow the registered engines)
  --nats URL            register in NATS (nats://HOST:4222; JetStream on: nats-server -js):
                        URL, events, replay and model in the bucket kvroute_CLUSTER_engines,
                        written again every ${DEFAULT_ENGINE_TTL_MS / 3000} s; the bucket forgets an entry not
                        written for ${DEFAULT_ENGINE_TTL_MS / 1000} s; deleted when the engine stops
  --advertise URL       the URL gateways reach this engine at (default: its listening URL);
                        its host also replaces a wildcard host in the events/replay endpoints
  --cluster NAME        the gateways' --cluster (default ${DEFAULT_CLUSTER})
${NATS_AUTH_HELP}`;

export function readEngineOptions(flags: Flags): EngineServerOptions {
  const server: EngineServerOptions = {
    host: flags.string('host') ?? SERVER_DEFAULTS.host,
    port: flags.number('port', { min: 0, max: 65535, integer: true }) ?? DEFAULT_PORT,
    servedModelName: flags.string('served-model-name'),
    maxModelLen: flags.positive('max-model-len', true),
    speedup: flags.positive('speedup'),
    kvEvents: flags.string('kv-events') ?? null,
    kvReplay: flags.string('kv-replay') ?? null,
    kvEventsFormat: flags.oneOf('kv-events-format', WIRE_FORMATS),
    kvEventsTopic: flags.string('kv-events-topic'),
    kvReplayForm: flags.oneOf('kv-replay-form', REPLAY_FORMS),
    kvReplayBufferBatches: flags.positive('kv-replay-buffer', true),
    seed: flags.number('seed', { integer: true }),
    servedModelAliases: flags.has('served-model-alias')
      ? flags.strings('served-model-alias')
      : undefined,
    memoryUtilization: flags.fraction('gpu-memory-utilization'),
    maxLogprobs: flags.number('max-logprobs', { min: -1, integer: true }),
    enableAutoToolChoice: flags.bool('enable-auto-tool-choice') || undefined,
    toolCallParser: flags.string('tool-call-parser'),
    prefixCaching: onOff(flags, 'enable-prefix-caching'),
    headersTimeoutMs: flags.positive('headers-timeout-ms'),
    requestTimeoutMs: flags.positive('request-timeout-ms'),
    streamBufferLimitBytes: flags.positive('stream-buffer-limit-bytes', true),
    streamStallTimeoutMs: flags.positive('stream-stall-timeout-ms'),
    tokenizer: flags.string('tokenizer'),
    chatTemplate: flags.string('chat-template'),
    enableLora: onOff(flags, 'enable-lora'),
    loraModules: flags.has('lora-modules')
      ? flags.strings('lora-modules').map(parseLoraModule)
      : undefined,
    apiKeys: apiKeysOf(flags.strings('api-key'), process.env.VLLM_API_KEY),
    allowRuntimeLoraUpdating:
      flags.bool('allow-runtime-lora-updating') ||
      runtimeLoraUpdatingFromEnv(process.env.VLLM_ALLOW_RUNTIME_LORA_UPDATING) ||
      undefined,
  };
  Object.assign(server, readKvTransferFlags(flags));
  const kvCacheDtype = flags.oneOf('kv-cache-dtype', KV_CACHE_DTYPES);
  if (kvCacheDtype !== undefined) server.kvDtype = kvCacheDtype.startsWith('fp8') ? 'fp8' : 'bf16';
  // Leave out what was not given, so the server's defaults apply.
  const given = Object.fromEntries(Object.entries(server).filter(([, v]) => v !== undefined));
  return { ...readEngineFlags(flags), ...given };
}

/**
 * One --lora-modules item as vLLM's LoRAParserAction reads it: `name=path` when it has an `=` and
 * no comma, else a JSON object with `name`, `path` and optionally `base_model_name`.
 */
export function parseLoraModule(item: string): LoraModule {
  if (item.includes('=') && !item.includes(',')) {
    const parts = item.split('=');
    if (parts.length !== 2 || parts[0] === '' || parts[1] === '') {
      throw new UsageError(`--lora-modules takes name=path, got '${item}'`);
    }
    return { name: parts[0]!, path: parts[1]! };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(item);
  } catch {
    throw new UsageError(`Invalid JSON format for --lora-modules: ${item}`);
  }
  const fields = ['name', 'path', 'base_model_name'];
  const bad = (why: string): never => {
    throw new UsageError(`Invalid fields for --lora-modules: ${item} - ${why}`);
  };
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    return bad('expected a JSON object');
  }
  const o = parsed as Record<string, unknown>;
  const unknown = Object.keys(o).filter((k) => !fields.includes(k));
  if (unknown.length > 0) bad(`unexpected keyword argument '${unknown[0]}'`);
  if (typeof o.name !== 'string' || o.name === '') bad("'name' must be a non-empty string");
  if (typeof o.path !== 'string' || o.path === '') bad("'path' must be a non-empty string");
  const base = o.base_model_name;
  if (base !== undefined && base !== null && typeof base !== 'string') {
    bad("'base_model_name' must be a string");
  }
  return {
    name: o.name as string,
    path: o.path as string,
    ...(typeof base === 'string' && { baseModelName: base }),
  };
}

/** --kv-transfer-config (JSON and dotted parts), the modelled link and vLLM's abort timeout. */
function readKvTransferFlags(flags: Flags): EngineServerOptions {
  const json = flags.string('kv-transfer-config') ?? null;
  const parts = flags.has('kv-transfer-config-part')
    ? flags.strings('kv-transfer-config-part')
    : [];
  const gbps = flags.positive('kv-transfer-gbps');
  const latency = flags.number('kv-transfer-latency-ms', { min: 0 });
  if (json === null && parts.length === 0) {
    if (gbps !== undefined || latency !== undefined) {
      throw new UsageError(
        '--kv-transfer-gbps and --kv-transfer-latency-ms need --kv-transfer-config',
      );
    }
    const stray = [...TRANSFER_SECURITY_FLAGS.split(' '), TRANSFER_SECURITY_BOOLEAN_FLAGS].find(
      (f) => flags.has(f),
    );
    if (stray !== undefined) throw new UsageError(`--${stray} needs --kv-transfer-config`);
    return {};
  }
  let config: ReturnType<typeof parseKvTransferConfig>;
  try {
    config = parseKvTransferConfig(json, parts);
  } catch (err) {
    if (err instanceof KvTransferConfigError) throw new UsageError(err.message);
    throw err;
  }
  if (config.kvConnector === 'OffloadingConnector') return readCpuTier(config, gbps, latency);
  const timeoutS = process.env.VLLM_NIXL_ABORT_REQUEST_TIMEOUT;
  let kvAbortTimeoutMs: number | undefined;
  if (timeoutS !== undefined && timeoutS !== '') {
    const n = Number(timeoutS);
    if (!Number.isInteger(n) || n < 0) {
      throw new UsageError(
        `VLLM_NIXL_ABORT_REQUEST_TIMEOUT must be whole seconds, got '${timeoutS}'`,
      );
    }
    kvAbortTimeoutMs = n * 1000;
  }
  return {
    kvTransferConfig: config,
    ...readTransferSecurityFlags(flags, process.env),
    ...(gbps !== undefined && { kvTransferGbps: gbps }),
    ...(latency !== undefined && { kvTransferLatencyMs: latency }),
    ...(kvAbortTimeoutMs !== undefined && { kvAbortTimeoutMs }),
  };
}

/** The OffloadingConnector: a CPU tier, sized in blocks or bytes (no P/D link). */
function readCpuTier(
  config: KvTransferConfig,
  gbps: number | undefined,
  latency: number | undefined,
): EngineServerOptions {
  if (gbps !== undefined || latency !== undefined) {
    throw new UsageError(
      '--kv-transfer-gbps and --kv-transfer-latency-ms are the NixlConnector link; the OffloadingConnector takes --cpu-kv-gbps',
    );
  }
  let tier: ReturnType<typeof cpuTierSpec>;
  try {
    tier = cpuTierSpec(config);
  } catch (err) {
    if (err instanceof KvTransferConfigError) throw new UsageError(err.message);
    throw err;
  }
  return 'numCpuBlocks' in tier
    ? { cpuKvBlocks: tier.numCpuBlocks }
    : { cpuKvGiB: tier.cpuBytesToUse / 2 ** 30 };
}

/** vLLM's BooleanOptionalAction pair: --NAME true, --no-NAME false, neither undefined. */
function onOff(flags: Flags, name: string): boolean | undefined {
  if (flags.bool(name) && flags.bool(`no-${name}`)) {
    throw new UsageError(`--${name} and --no-${name} contradict each other`);
  }
  if (flags.bool(name)) return true;
  return flags.bool(`no-${name}`) ? false : undefined;
}

/** The engine's flags from a command line in kvroute's or vLLM's spelling (tests read it too). */
export function readEngineArgv(argv: readonly string[]) {
  const spec = { ...FLAGS, ...ENGINE_FLAGS, ...ENGINE_FAULT_FLAGS };
  const vllm = translateVllmArgs(argv, spec);
  return { vllm, flags: readFlags(vllm.args, FLAGS, ENGINE_FLAGS, ENGINE_FAULT_FLAGS) };
}

export async function run(argv: string[]): Promise<number> {
  const { vllm, flags } = readEngineArgv(argv);
  if (flags === 'help') return printHelp(HELP);
  for (const warning of vllm.warnings) process.stderr.write(`kvroute engine: ${warning}\n`);
  const options = readEngineOptions(flags);
  const open = openSideChannelWarning(options);
  if (open !== null) process.stderr.write(open);
  const faults = readEngineFaultFlags(flags);
  if (faults) options.faults = faults;
  if (options.kvReplay && !options.kvEvents) {
    throw new UsageError('--kv-replay needs --kv-events');
  }
  if (options.kvEvents && /^tcp:\/\/0\.0\.0\.0:/.test(options.kvEvents)) {
    process.stderr.write(
      `kvroute engine: --kv-events ${options.kvEvents} connects to 0.0.0.0 (vLLM binds only endpoints with *, ::, ipc:// or inproc://); write tcp://*:PORT to listen\n`,
    );
  }
  if (flags.bool('no-enable-auto-tool-choice')) options.enableAutoToolChoice = false;
  if (options.enableAutoToolChoice && !options.toolCallParser) {
    // vLLM refuses this at startup ("--enable-auto-tool-choice requires --tool-call-parser").
    throw new UsageError('--enable-auto-tool-choice requires --tool-call-parser');
  }
  if ((options.loraModules?.length ?? 0) > 0 && !options.enableLora) {
    throw new UsageError('--lora-modules needs --enable-lora');
  }
  readRuntimeFlags(flags, options);
  const discovery = readDiscoveryFlags(flags);
  const server = await startEngineServer(options);
  let registration: Registration | null = null;
  if (discovery !== null) {
    const advertise = discovery.advertise ?? server.url;
    const host = new URL(advertise).hostname;
    try {
      registration = await registerEngine(
        {
          url: discovery.url,
          cluster: discovery.cluster,
          ...(discovery.auth !== null && { auth: discovery.auth }),
          entry: {
            url: advertise,
            events: advertisedEndpoint(server.eventsEndpoint, host),
            replay: advertisedEndpoint(server.replayEndpoint, host),
            model: server.servedModelName,
          },
        },
        (err) =>
          process.stderr.write(`kvroute engine: NATS registration not refreshed: ${err.message}\n`),
      );
    } catch (err) {
      await server.close();
      throw err;
    }
  }
  process.stdout.write(
    `kvroute engine ready url=${server.url} model=${server.servedModelName} events=${server.eventsEndpoint ?? '-'} replay=${server.replayEndpoint ?? '-'}${discovery ? ` registered=${discovery.url}` : ''}\n`,
  );
  return serveUntilSignal(async () => {
    await registration?.close();
    await server.close();
  });
}

/** --runtime, --gguf and --threads into the server options (checked against each other). */
function readRuntimeFlags(flags: Flags, options: EngineServerOptions): void {
  const choice = readRuntimeChoice(flags);
  if (choice === null) return;
  const { runtime, gguf, threads } = choice;
  if (gguf === undefined) throw new UsageError('--runtime llama.cpp needs --gguf FILE');
  options.runtime = runtime;
  options.llamaCpp = { gguf, ...(threads !== undefined && { threads }) };
  // The engine flags filled in the sim's default; the llama.cpp runtime has its own.
  if (!flags.has('max-seqs')) delete options.maxSeqs;
}

function readDiscoveryFlags(flags: Flags): {
  url: string;
  advertise: string | undefined;
  cluster: string;
  auth: NatsAuth | null;
} | null {
  const url = flags.string('nats');
  const advertise = flags.string('advertise');
  const cluster = flags.string('cluster');
  const auth = readNatsAuth(flags);
  if (url === undefined) {
    if (advertise !== undefined) throw new UsageError('--advertise needs --nats URL');
    if (cluster !== undefined) throw new UsageError('--cluster needs --nats URL');
    if (auth !== null) throw new UsageError('a NATS credential or TLS flag needs --nats URL');
    return null;
  }
  if (!/^(nats|tls|wss?):\/\/[^/]+/.test(url)) {
    throw new UsageError(`--nats must be nats://HOST:PORT, got '${url}'`);
  }
  if (advertise !== undefined && !/^https?:\/\/[^/]+/.test(advertise)) {
    throw new UsageError(`--advertise must be http(s)://HOST:PORT, got '${advertise}'`);
  }
  if (cluster !== undefined && !isClusterName(cluster)) {
    throw new UsageError(`--cluster takes letters, digits, - and _, got '${cluster}'`);
  }
  return {
    url,
    advertise: advertise?.replace(/\/+$/, ''),
    cluster: cluster ?? DEFAULT_CLUSTER,
    auth,
  };
}

/** A ZMQ endpoint as a gateway elsewhere reaches it: a wildcard host becomes `host`. */
function advertisedEndpoint(endpoint: string | null, host: string): string | null {
  if (endpoint === null) return null;
  return endpoint.replace(/^tcp:\/\/(\*|0\.0\.0\.0)(?=:)/, `tcp://${host}`);
}
