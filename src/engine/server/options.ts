/**
 * Engine server options: what `kvroute engine` flags and `startEngineServer` callers set, with
 * defaults, resolved into the engine core's config plus what the HTTP shell needs. The engine's
 * own options and defaults are `../options.ts`'s; this file adds the server's.
 */
import type { ReplayForm, WireFormat } from '../../kv/wire.ts';
import type { Dtype } from '../../model/catalog.ts';
import {
  kvBytesPerToken,
  kvPoolTokens,
  replicaSpecProblem,
  type ReplicaSpec,
} from '../../model/cost.ts';
import { makeReplicaSpec } from '../../model/spec.ts';
import { DEFAULT_MAX_LORAS } from '../lora.ts';
import { cpuBlocksOf, ENGINE_DEFAULTS, type EngineOptions } from '../options.ts';
import { type EngineConfig, EngineError } from '../types.ts';
import type { KvTransferConfig } from '../connector/kvTransferConfig.ts';
import type { LoraModule } from './adapters.ts';
import type { EngineFaults } from './faults.ts';
import type { LlamaCppServerOptions } from '../runtime/llamaCpp/serve.ts';
import type { SteppableEngine } from './driver.ts';
import { DEFAULT_STREAM_LIMITS, type StreamLimits } from './streamWriter.ts';
import { DEFAULT_MAX_LOGPROBS } from './validation.ts';
import { definedFields } from '../../util/definedFields.ts';

/** Every field optional: what is left out takes ENGINE_DEFAULTS or SERVER_DEFAULTS. */
export interface EngineServerOptions extends Partial<EngineOptions> {
  /** Interface to listen on (default 127.0.0.1). */
  host?: string;
  /** TCP port; 0 (the default) picks a free one. */
  port?: number;
  /** A full replica spec; overrides model/gpu/tp. */
  spec?: ReplicaSpec;
  /** KV cache dtype (vLLM's --kv-cache-dtype; default the seed's BF16). */
  kvDtype?: Dtype;
  /** Name clients must use in `model` (default: the catalog model name). */
  servedModelName?: string;
  /** More names the model answers to (vLLM's --served-model-name takes several; the first wins). */
  servedModelAliases?: string[];
  /** Context window (default: the model's from the catalog). */
  maxModelLen?: number;
  /** Modeled time runs this many times faster than the wall clock (default 1). */
  speedup?: number;
  /** ZMQ PUB endpoint for KV events, e.g. tcp://*:5557; null/absent: no events (vLLM's default). */
  kvEvents?: string | null;
  /** ZMQ ROUTER endpoint for replay, e.g. tcp://*:5558. */
  kvReplay?: string | null;
  kvEventsFormat?: WireFormat;
  /** Replay answer framing (default: `topic` with map events, `no-topic` with array events). */
  kvReplayForm?: ReplayForm;
  kvEventsTopic?: string;
  /** Batches kept for replay. */
  kvReplayBufferBatches?: number;
  /** Seeds the generated text. */
  seed?: number;
  /** The `engine` label on metrics (vLLM's engine index, default "0"). */
  engineLabel?: string;
  /** Request bodies above this are refused with 413 (default 16 MiB). */
  bodyLimitBytes?: number;
  /** A client must send its request head within this (default 10 s), and all of it within... */
  headersTimeoutMs?: number;
  /** ... this (default 60 s). */
  requestTimeoutMs?: number;
  /** A stream whose client does not read is aborted past this many waiting bytes (1 MiB)... */
  streamBufferLimitBytes?: number;
  /** ... or this long without a drain (30 s). */
  streamStallTimeoutMs?: number;
  /** vLLM's --max-logprobs (default 20; -1: the vocabulary size). */
  maxLogprobs?: number;
  /** vLLM's --enable-auto-tool-choice: serve tool_choice "auto" (the model answers in text). */
  enableAutoToolChoice?: boolean;
  /** vLLM's --tool-call-parser (accepted; the simulated model never calls tools). */
  toolCallParser?: string | null;
  /** 'builtin' (the default) or a model folder with tokenizer.json (vLLM's `--tokenizer`). */
  tokenizer?: string;
  /** A Jinja chat template file (vLLM's `--chat-template`); default: the tokenizer's own. */
  chatTemplate?: string | null;
  /**
   * vLLM's --enable-lora: requests may name an adapter as their `model`; `lora` (from
   * EngineOptions) sets its limits (default max_loras 1, as vLLM).
   */
  enableLora?: boolean;
  /** vLLM's --lora-modules: adapters loaded at start (needs enableLora). */
  loraModules?: LoraModule[];
  /**
   * Serve POST /v1/load_lora_adapter and /v1/unload_lora_adapter (vLLM serves them only when
   * VLLM_ALLOW_RUNTIME_LORA_UPDATING is set; `kvroute engine` sets this from that variable or
   * from --allow-runtime-lora-updating).
   */
  allowRuntimeLoraUpdating?: boolean;
  /** Faults to show the router's audit (`faults.ts`); none by default. */
  faults?: EngineFaults;
  /** vLLM's --kv-transfer-config (connector/kvTransferConfig.ts); absent: no P/D. */
  kvTransferConfig?: KvTransferConfig | null;
  /** The OffloadingConnector's CPU tier in blocks (`num_cpu_blocks`); wins over cpuKvGiB. */
  cpuKvBlocks?: number;
  /** Modelled KV link bandwidth for pulls, GB/s (default 25). */
  kvTransferGbps?: number;
  /** Modelled latency per pull, ms (default 1). */
  kvTransferLatencyMs?: number;
  /** Held blocks are freed this long after a prefill if never pulled (vLLM's 480 s). */
  kvAbortTimeoutMs?: number;
  /**
   * The P/D fleet's shared secret (connector/secret.ts): side-channel calls need it and the
   * params this engine emits carry a MAC made with it. Absent: the first of `apiKeys`; neither:
   * the side channel is closed (`kvTransferInsecure` opens it).
   */
  kvTransferSecret?: string;
  /**
   * With no secret at all, the side channel open to anyone and params not verified (vLLM's own
   * behaviour, for a trusted network); without it, an engine with no secret refuses
   * `/nixl/pull` and `/nixl/done` (403), holds nothing for a remote decode and pulls nothing.
   */
  kvTransferInsecure?: boolean;
  /** Blocks held for remote decodes at most, all clients (default: half the KV pool). */
  kvMaxHeldBlocks?: number;
  /** ... and per client, an API key or else an address (default: half of kvMaxHeldBlocks). */
  kvMaxHeldBlocksPerClient?: number;
  /**
   * vLLM's --api-key (or VLLM_API_KEY): requests on /v1 paths need `Authorization: Bearer` one
   * of these (`auth.ts`); empty or absent: open, as vLLM without a key.
   */
  apiKeys?: string[];
  /**
   * `sim` (the default): the cost model's clock and the simulated model's text. `llama.cpp`:
   * real forward passes on the CPU, with `llamaCpp` saying which model.
   */
  runtime?: RuntimeName;
  llamaCpp?: LlamaCppServerOptions;
  /** Builds the core (default: EngineCore); a seam for tests. */
  makeCore?: (config: EngineConfig) => SteppableEngine;
}

/** The engine's runtimes: what executes a step's plan. */
export const RUNTIME_NAMES = ['sim', 'llama.cpp'] as const;
export type RuntimeName = (typeof RUNTIME_NAMES)[number];

/** The server's own defaults (the engine's are ENGINE_DEFAULTS). */
export const SERVER_DEFAULTS = {
  host: '127.0.0.1',
  port: 0,
  speedup: 1,
  kvEventsFormat: 'map' as WireFormat,
  seed: 0,
  engineLabel: '0',
  bodyLimitBytes: 16 * 1024 * 1024,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 60_000,
};

/**
 * Replay framing that goes with an event form: vLLM >= 0.26 sends map events and a topic frame in
 * replay answers; older vLLM sends array events and no topic frame.
 */
export function defaultReplayForm(format: WireFormat): ReplayForm {
  return format === 'array' ? 'no-topic' : 'topic';
}

export interface ResolvedEngineOptions {
  host: string;
  port: number;
  engineConfig: EngineConfig;
  modelName: string;
  servedModelName: string;
  /** Every name the model answers to, servedModelName first. */
  servedModelNames: string[];
  maxModelLen: number;
  speedup: number;
  seed: number;
  engineLabel: string;
  bodyLimitBytes: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  streamLimits: StreamLimits;
  maxLogprobs: number;
  enableAutoToolChoice: boolean;
  toolCallParser: string | null;
  loraModules: LoraModule[];
  allowRuntimeLoraUpdating: boolean;
}

export function resolveEngineOptions(o: EngineServerOptions): ResolvedEngineOptions {
  const spec =
    o.spec ??
    makeReplicaSpec({
      model: o.model ?? ENGINE_DEFAULTS.model,
      gpu: o.gpu ?? ENGINE_DEFAULTS.gpu,
      tp: o.tp ?? ENGINE_DEFAULTS.tp,
      profile: o.profile,
      memoryUtilization: o.memoryUtilization,
      kvDtype: o.kvDtype,
    });
  const util = o.memoryUtilization;
  if (util !== undefined && !(util > 0 && util <= 1)) {
    throw new EngineError('ERR_CONFIG', `gpu_memory_utilization must be in (0, 1], got ${util}`);
  }
  const problem = replicaSpecProblem(spec);
  if (problem) throw new EngineError('ERR_CONFIG', problem);
  const speedup = o.speedup ?? SERVER_DEFAULTS.speedup;
  if (!(speedup > 0 && Number.isFinite(speedup))) {
    throw new EngineError('ERR_CONFIG', `speedup must be a finite number > 0, got ${speedup}`);
  }
  const maxModelLen = o.maxModelLen ?? spec.model.maxModelLen;
  const servedModelName = o.servedModelName ?? spec.model.name;
  if ((o.loraModules?.length ?? 0) > 0 && !o.enableLora) {
    throw new EngineError('ERR_CONFIG', '--lora-modules needs --enable-lora');
  }
  if (!(Number.isInteger(maxModelLen) && maxModelLen >= 1)) {
    throw new EngineError('ERR_CONFIG', `maxModelLen must be an integer >= 1, got ${maxModelLen}`);
  }
  return {
    host: o.host ?? SERVER_DEFAULTS.host,
    port: o.port ?? SERVER_DEFAULTS.port,
    engineConfig: {
      spec,
      budgetTokens: o.budgetTokens ?? ENGINE_DEFAULTS.budgetTokens,
      maxSeqs: o.maxSeqs ?? ENGINE_DEFAULTS.maxSeqs,
      kvPolicy: o.kvPolicy ?? ENGINE_DEFAULTS.kvPolicy,
      blockSize: o.blockSize ?? ENGINE_DEFAULTS.blockSize,
      ...definedFields({ kvBlocks: o.kvBlocks, prefixCaching: o.prefixCaching }),
      ...(o.enableLora && { lora: { maxLoras: DEFAULT_MAX_LORAS, ...o.lora } }),
      ...(o.kvTransferConfig && { kvTransfer: holdConfigOf(o, spec) }),
      ...cpuOffloadOf(o, spec, o.blockSize ?? ENGINE_DEFAULTS.blockSize),
    },
    modelName: spec.model.name,
    servedModelName,
    servedModelNames: [servedModelName, ...(o.servedModelAliases ?? [])],
    maxModelLen,
    speedup,
    seed: o.seed ?? SERVER_DEFAULTS.seed,
    engineLabel: o.engineLabel ?? SERVER_DEFAULTS.engineLabel,
    bodyLimitBytes: o.bodyLimitBytes ?? SERVER_DEFAULTS.bodyLimitBytes,
    ...serverTimeouts(o),
    streamLimits: {
      limitBytes: o.streamBufferLimitBytes ?? DEFAULT_STREAM_LIMITS.limitBytes,
      stallMs: o.streamStallTimeoutMs ?? DEFAULT_STREAM_LIMITS.stallMs,
    },
    maxLogprobs: o.maxLogprobs ?? DEFAULT_MAX_LOGPROBS,
    enableAutoToolChoice: o.enableAutoToolChoice ?? false,
    toolCallParser: o.toolCallParser ?? null,
    loraModules: o.loraModules ?? [],
    allowRuntimeLoraUpdating: o.allowRuntimeLoraUpdating ?? false,
  };
}

function serverTimeouts(o: EngineServerOptions): {
  headersTimeoutMs: number;
  requestTimeoutMs: number;
} {
  const headersTimeoutMs = o.headersTimeoutMs ?? SERVER_DEFAULTS.headersTimeoutMs;
  const requestTimeoutMs = o.requestTimeoutMs ?? SERVER_DEFAULTS.requestTimeoutMs;
  for (const [name, v] of [
    ['headersTimeoutMs', headersTimeoutMs],
    ['requestTimeoutMs', requestTimeoutMs],
  ] as const) {
    if (!(Number.isInteger(v) && v >= 1)) {
      throw new EngineError('ERR_CONFIG', `${name} must be an integer >= 1, got ${v}`);
    }
  }
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new EngineError('ERR_CONFIG', 'headersTimeoutMs must not exceed requestTimeoutMs');
  }
  return { headersTimeoutMs, requestTimeoutMs };
}

/** The CPU tier from --cpu-kv-gib / --kv-offloading-size or num_cpu_blocks; none without either. */
function cpuOffloadOf(
  o: EngineServerOptions,
  spec: ReplicaSpec,
  blockSize: number,
): { cpuOffload?: NonNullable<EngineConfig['cpuOffload']> } {
  const cpuBlocks =
    o.cpuKvBlocks ??
    (o.cpuKvGiB === undefined
      ? undefined
      : cpuBlocksOf(o.cpuKvGiB, kvBytesPerToken(spec.model, spec.kvDtype), blockSize));
  if (cpuBlocks === undefined) return {};
  return {
    cpuOffload: { cpuBlocks, ...(o.cpuKvGbps !== undefined && { cpuKvGbps: o.cpuKvGbps }) },
  };
}

/**
 * The NixlConnector's hold bounds: by default half the KV pool for remote decodes in all and
 * half of that per client, so holds (each up to the abort timeout) never starve local work and
 * no one client takes the whole share. The pool's size as the core computes it.
 */
function holdConfigOf(
  o: EngineServerOptions,
  spec: ReplicaSpec,
): NonNullable<EngineConfig['kvTransfer']> {
  const blockSize = o.blockSize ?? ENGINE_DEFAULTS.blockSize;
  const poolBlocks = o.kvBlocks ?? Math.floor(kvPoolTokens(spec) / blockSize);
  const maxHeldBlocks = o.kvMaxHeldBlocks ?? Math.floor(poolBlocks / 2);
  const maxHeldBlocksPerClient = o.kvMaxHeldBlocksPerClient ?? Math.floor(maxHeldBlocks / 2);
  for (const [name, v] of [
    ['kvMaxHeldBlocks', maxHeldBlocks],
    ['kvMaxHeldBlocksPerClient', maxHeldBlocksPerClient],
  ] as const) {
    if (!Number.isInteger(v) || v < 0) {
      throw new EngineError('ERR_CONFIG', `${name} must be an integer >= 0, got ${v}`);
    }
  }
  return {
    ...(o.kvAbortTimeoutMs !== undefined && { abortTimeoutMs: o.kvAbortTimeoutMs }),
    maxHeldBlocks,
    maxHeldBlocksPerClient,
  };
}
