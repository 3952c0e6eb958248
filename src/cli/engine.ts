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
import { type LoraModule, runtimeLoraUpdatingFromEnv } from '../engine/server/adapters.ts';
import { apiKeysOf } from '../engine/server/auth.ts';
import { type EngineServerOptions, SERVER_DEFAULTS } from '../engine/server/options.ts';
import { startEngineServer } from '../engine/server/server.ts';
import { type Registration, registerEngine } from '../sync/discovery.ts';
import type { NatsAuth } from '../sync/natsAuth.ts';
import { DEFAULT_CLUSTER, isClusterName } from '../sync/subjects.ts';
import { type Flags, printHelp, readFlags, UsageError } from './args.ts';
import { readEngineFaultFlags } from './engineFaultFlags.ts';
import { readEngineFlags } from './engineFlags.ts';
import {
  openSideChannelWarning,
  readTransferSecurityFlags,
  TRANSFER_SECURITY_FLAG_NAMES,
} from './engineTransferSecurity.ts';
import { readNatsAuth } from './natsFlags.ts';
import { DEFAULT_ENGINE_PORT, ENGINE_SERVER_OPTIONS } from './options/engine.ts';
import { helpOf } from './options/help.ts';
import { readerOf } from './options/read.ts';
import { specOf } from './options/spec.ts';
import { readRuntimeChoice } from './runtimeFlags.ts';
import { serveUntilSignal } from './untilSignal.ts';
import { translateVllmArgs } from './vllmFlags.ts';
import { definedFields } from '../util/definedFields.ts';

export const FLAGS = specOf(ENGINE_SERVER_OPTIONS);

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

${helpOf(ENGINE_SERVER_OPTIONS)}`;

export function readEngineOptions(flags: Flags): EngineServerOptions {
  const option = readerOf(ENGINE_SERVER_OPTIONS, flags);
  const server: EngineServerOptions = {
    host: option('host') ?? SERVER_DEFAULTS.host,
    port: option('port') ?? DEFAULT_ENGINE_PORT,
    servedModelName: option('served-model-name'),
    maxModelLen: option('max-model-len'),
    speedup: option('speedup'),
    kvEvents: option('kv-events') ?? null,
    kvReplay: option('kv-replay') ?? null,
    kvEventsFormat: option('kv-events-format'),
    kvEventsTopic: option('kv-events-topic'),
    kvReplayForm: option('kv-replay-form'),
    kvReplayBufferBatches: option('kv-replay-buffer'),
    seed: option('seed'),
    servedModelAliases: option('served-model-alias'),
    memoryUtilization: option('gpu-memory-utilization'),
    maxLogprobs: option('max-logprobs'),
    enableAutoToolChoice: option('enable-auto-tool-choice'),
    toolCallParser: option('tool-call-parser'),
    prefixCaching: onOff(flags, 'enable-prefix-caching'),
    headersTimeoutMs: option('headers-timeout-ms'),
    requestTimeoutMs: option('request-timeout-ms'),
    streamBufferLimitBytes: option('stream-buffer-limit-bytes'),
    streamStallTimeoutMs: option('stream-stall-timeout-ms'),
    tokenizer: option('tokenizer'),
    chatTemplate: option('chat-template'),
    enableLora: onOff(flags, 'enable-lora'),
    loraModules: option('lora-modules')?.map(parseLoraModule),
    apiKeys: apiKeysOf(option('api-key') ?? [], process.env.VLLM_API_KEY),
    allowRuntimeLoraUpdating:
      option('allow-runtime-lora-updating') ||
      runtimeLoraUpdatingFromEnv(process.env.VLLM_ALLOW_RUNTIME_LORA_UPDATING) ||
      undefined,
  };
  Object.assign(server, readKvTransferFlags(flags));
  const kvCacheDtype = option('kv-cache-dtype');
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
  const option = readerOf(ENGINE_SERVER_OPTIONS, flags);
  const json = option('kv-transfer-config') ?? null;
  const parts = option('kv-transfer-config-part') ?? [];
  const gbps = option('kv-transfer-gbps');
  const latency = option('kv-transfer-latency-ms');
  if (json === null && parts.length === 0) {
    if (gbps !== undefined || latency !== undefined) {
      throw new UsageError(
        '--kv-transfer-gbps and --kv-transfer-latency-ms need --kv-transfer-config',
      );
    }
    const stray = TRANSFER_SECURITY_FLAG_NAMES.find((f) => flags.has(f));
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
    ...definedFields({
      kvTransferGbps: gbps,
      kvTransferLatencyMs: latency,
      kvAbortTimeoutMs,
    }),
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
  const vllm = translateVllmArgs(argv, FLAGS);
  return { vllm, flags: readFlags(vllm.args, FLAGS) };
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
  const option = readerOf(ENGINE_SERVER_OPTIONS, flags);
  const url = option('nats');
  const advertise = option('advertise');
  const cluster = option('cluster');
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
