/**
 * `startEngineServer`: the simulated vLLM engine as an HTTP server (node:http, keep-alive) with
 * the engine core on the wall clock, Prometheus metrics and an optional ZMQ KV event publisher.
 * Several can run in one process (each has its own core, registry and sockets), which is how the
 * gateway embeds a fleet and how tests start servers on port 0.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApiError } from '../../openai/errors.ts';
import {
  closeServer,
  createHttpServer,
  findRoute,
  listen,
  parseJson,
  readBody,
  sendError,
} from '../../openai/http.ts';
import { BUILTIN_TOKENIZER, loadPromptTokenizer } from '../../tokenizer/promptTokenizer.ts';
import { EngineCore } from '../core.ts';
import { ApiKeyCheck } from './auth.ts';
import { AdapterRegistry, loadLoraAdapter, unloadLoraAdapter } from './adapters.ts';
import type { EngineCounters } from '../types.ts';
import { type SteppableEngine, WallClockDriver } from './driver.ts';
import { StepLoopDriver } from './stepLoop.ts';
import { LlamaCppEngine } from '../runtime/llamaCpp/engine.ts';
import type { PlacementCounts } from '../runtime/llamaCpp/runtime.ts';
import {
  LLAMA_CPP_DEFAULT_MAX_SEQS,
  type LlamaCppServerOptions,
  type LlamaCppServing,
  openLlamaCpp,
} from '../runtime/llamaCpp/serve.ts';
import type { PromptTokenizer } from '../../tokenizer/promptTokenizer.ts';
import { EngineError, type StepResult } from '../types.ts';
import { toApiError } from './errors.ts';
import * as handlers from './handlers.ts';
import { EngineMetrics } from './metrics.ts';
import {
  defaultReplayForm,
  type EngineServerOptions,
  type ResolvedEngineOptions,
  resolveEngineOptions,
} from './options.ts';
import { droppedKind, type EngineFaults, liarStoredEvent, withDroppedEvents } from './faults.ts';
import { KvEventPublisher } from './publisher.ts';
import { simulatedModel } from './textGen.ts';
import { type ServerTransfers, startTransfers } from '../connector/serverWiring.ts';

export type { EngineServerOptions } from './options.ts';

export interface EngineServerHandle {
  /** Base URL, e.g. http://127.0.0.1:8001 (no trailing slash). */
  url: string;
  port: number;
  /** Connectable KV event endpoint, or null when events are off. */
  eventsEndpoint: string | null;
  replayEndpoint: string | null;
  /** KV event batches published so far (the next batch's seq); 0 when events are off. */
  kvEventBatches(): number;
  servedModelName: string;
  /** The core's counters now (what /metrics reports). */
  counters(): EngineCounters;
  /** The llama.cpp runtime: how admissions found their cached prefix. */
  placements?(): PlacementCounts;
  /** Stops accepting, aborts what is in flight, closes sockets. Idempotent. */
  close(): Promise<void>;
}

type Route =
  | {
      method: 'GET';
      handle: (ctx: handlers.HandlerContext, res: ServerResponse) => void | Promise<void>;
    }
  | {
      method: 'POST';
      handle: (
        ctx: handlers.HandlerContext,
        body: unknown,
        res: ServerResponse,
      ) => void | Promise<void>;
    };

/** What a server runs on: its resolved options, its core, its prompt tokenizer, a real runtime. */
interface OpenedCore {
  real: LlamaCppServing | null;
  o: ResolvedEngineOptions;
  core: SteppableEngine | LlamaCppEngine;
  prompts: PromptTokenizer;
}

export async function startEngineServer(
  options: EngineServerOptions = {},
): Promise<EngineServerHandle> {
  const { real, o, core, prompts } = await openCore(options);
  const llama = core instanceof LlamaCppEngine ? core : null;
  const adapters = openAdapters(o, core);
  const metrics = newMetrics(o, core);
  const publisher = await openPublisher(options, adapters);
  const faults = options.faults ?? {};
  const driver = newDriver(o, core, llama, metrics, publisher, faults);
  const resetTimer = startSilentResets(faults, core, o.speedup);
  const ctx = handlerContext(options, o, prompts, { driver, metrics, adapters, publisher, real });
  const transfers = startTransfers(options, o, core, () => port);
  ctx.kvTransfer = transfers?.context ?? null;
  // Build the output vocabulary now (the tokenizer's first encodes are slow), not on the
  // first request, whose time to first token would pay for it.
  if (real === null) simulatedModel(ctx.tokenizer);
  let closing = false;
  const routes = engineRoutes(o, transfers, {
    healthy: () => !closing && !driver.dead,
    metricsText: () => metrics.text(core.counters()),
    contentType: () => metrics.contentType,
  });
  const apiKeys = new ApiKeyCheck(options.apiKeys ?? []);

  async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // vLLM's middleware runs before routing: an unknown /v1 path without the key is a 401 too.
    if (!apiKeys.admit(req, res) || (transfers !== null && !transfers.admit(req, res))) {
      req.resume();
      return;
    }
    const route = findRoute(routes, req, res);
    if (route.method === 'GET') return route.handle(ctx, res);
    if (closing) throw new ApiError('ERR_UNAVAILABLE', 'the engine is shutting down');
    const body = parseJson(await readBody(req, o.bodyLimitBytes));
    return route.handle(ctx, body, res);
  }

  const server = createHttpServer(o, (req, res) => {
    serve(req, res).catch((err: unknown) => sendError(res, toApiError(err)));
  });
  const { port, url } = await listen(server, o.port, o.host);
  transfers?.listening();

  let closed: Promise<void> | null = null;
  return {
    url,
    port,
    eventsEndpoint: publisher?.endpoint ?? null,
    replayEndpoint: publisher?.replayEndpoint ?? null,
    kvEventBatches: () => Number(publisher?.nextSeq ?? 0n),
    servedModelName: o.servedModelName,
    counters: () => core.counters(),
    ...(llama && { placements: () => llama.placements() }),
    close() {
      closed ??= (async () => {
        closing = true;
        if (resetTimer) clearInterval(resetTimer);
        transfers?.close();
        driver.close();
        if (driver instanceof StepLoopDriver) await driver.idle();
        await closeServer(server);
        await publisher?.close();
        await llama?.dispose();
        await real?.dispose();
      })();
      return closed;
    },
  };
}

/** Opens the runtime (llama.cpp or the simulated core); a failure disposes what was opened. */
async function openCore(options: EngineServerOptions): Promise<OpenedCore> {
  const real =
    options.runtime === 'llama.cpp'
      ? await openLlamaCpp(requireLlamaCppOptions(options), {
          tokenizer: options.tokenizer,
          chatTemplate: options.chatTemplate,
          enableLora: options.enableLora,
          speedup: options.speedup,
        })
      : null;
  try {
    const o = resolveEngineOptions(
      real === null
        ? options
        : {
            ...options,
            maxModelLen: options.maxModelLen ?? real.defaultMaxModelLen,
            servedModelName: options.servedModelName ?? real.defaultName,
            maxSeqs: options.maxSeqs ?? LLAMA_CPP_DEFAULT_MAX_SEQS,
          },
    );
    // One per process and folder: engines started in one process share it.
    const prompts =
      real?.prompts ??
      loadPromptTokenizer({
        tokenizer: options.tokenizer ?? BUILTIN_TOKENIZER,
        chatTemplate: options.chatTemplate ?? null,
      });
    const core = real
      ? await real.makeEngine(o.engineConfig, o.maxModelLen)
      : options.makeCore
        ? options.makeCore(o.engineConfig)
        : new EngineCore(o.engineConfig);
    return { real, o, core, prompts };
  } catch (err) {
    await real?.dispose();
    throw err;
  }
}

/** The LoRA adapter registry, with `--lora-modules` loaded (vLLM: a failure stops the server). */
function openAdapters(
  o: ResolvedEngineOptions,
  core: SteppableEngine | LlamaCppEngine,
): AdapterRegistry {
  const adapters = new AdapterRegistry(
    o.engineConfig.lora
      ? {
          loadAdapter: (name) => (core as SteppableEngine).loadAdapter?.(name),
          unloadAdapter: (name) => (core as SteppableEngine).unloadAdapter?.(name) ?? false,
        }
      : null,
  );
  for (const module of o.loraModules) adapters.load(module);
  return adapters;
}

function newMetrics(o: ResolvedEngineOptions, core: SteppableEngine | LlamaCppEngine) {
  const spec = o.engineConfig.spec;
  return new EngineMetrics({
    modelName: o.servedModelName,
    engine: o.engineLabel,
    maxModelLen: o.maxModelLen,
    toModeledS: (wallMs) => (wallMs * o.speedup) / 1000,
    lora: o.engineConfig.lora !== undefined,
    cacheConfig: {
      blockSize: o.engineConfig.blockSize,
      gpuMemoryUtilization: spec.memoryUtilization,
      cacheDtype: spec.kvDtype === 'fp8' ? 'fp8' : 'auto',
      enablePrefixCaching: o.engineConfig.prefixCaching ?? true,
      numGpuBlocks: core.counters().kvBlocksTotal,
      numGpuBlocksOverride: o.engineConfig.kvBlocks ?? null,
    },
  });
}

/** The ZMQ KV event publisher, or null when `--kv-events` is off. */
async function openPublisher(
  options: EngineServerOptions,
  adapters: AdapterRegistry,
): Promise<KvEventPublisher | null> {
  if (!options.kvEvents) return null;
  return KvEventPublisher.open({
    endpoint: options.kvEvents,
    replayEndpoint: options.kvReplay ?? null,
    ...(options.kvEventsTopic !== undefined && { topic: options.kvEventsTopic }),
    format: options.kvEventsFormat ?? 'map',
    replayForm: options.kvReplayForm ?? defaultReplayForm(options.kvEventsFormat ?? 'map'),
    ...(options.kvReplayBufferBatches !== undefined && {
      bufferBatches: options.kvReplayBufferBatches,
    }),
    loraIdOf: (name: string) => adapters.idOf(name),
  });
}

/** The driver that steps the core: each step's lag, size and KV events go to metrics and ZMQ. */
function newDriver(
  o: ResolvedEngineOptions,
  core: SteppableEngine | LlamaCppEngine,
  llama: LlamaCppEngine | null,
  metrics: EngineMetrics,
  publisher: KvEventPublisher | null,
  faults: EngineFaults,
): WallClockDriver | StepLoopDriver {
  const dropped = droppedKind(faults);
  const onStepEnd = (result: StepResult, lagMs: number) => {
    metrics.observeStepLag(lagMs / 1000);
    metrics.observeIteration(result.prefillTokens + result.decodeTokens);
    publisher?.publish(withDroppedEvents(result.events, dropped));
  };
  return llama !== null
    ? new StepLoopDriver(llama, { onStepEnd })
    : new WallClockDriver(core as SteppableEngine, { speedup: o.speedup, onStepEnd });
}

/** The `silentResetS` fault: the core forgets its cache on a timer, telling no one. */
function startSilentResets(
  faults: EngineFaults,
  core: SteppableEngine | LlamaCppEngine,
  speedup: number,
): ReturnType<typeof setInterval> | null {
  const resetTimer =
    faults.silentResetS === undefined
      ? null
      : setInterval(
          () => (core as SteppableEngine).forgetCacheSilently?.(),
          (faults.silentResetS * 1000) / speedup,
        );
  resetTimer?.unref();
  return resetTimer;
}

/** What the request handlers share: the driver, metrics, tokenizers, limits, faults. */
function handlerContext(
  options: EngineServerOptions,
  o: ResolvedEngineOptions,
  prompts: PromptTokenizer,
  parts: {
    driver: WallClockDriver | StepLoopDriver;
    metrics: EngineMetrics;
    adapters: AdapterRegistry;
    publisher: KvEventPublisher | null;
    real: LlamaCppServing | null;
  },
): handlers.HandlerContext {
  const { driver, metrics, adapters, publisher, real } = parts;
  const faults = options.faults ?? {};
  let engineIds = 0;
  const tokenizer = prompts.text;
  return {
    driver,
    metrics,
    tokenizer,
    prompts,
    ...(faults.chatTemplate !== undefined && {
      generationPrompts: loadPromptTokenizer({
        tokenizer: options.tokenizer ?? BUILTIN_TOKENIZER,
        chatTemplate: faults.chatTemplate,
      }),
    }),
    ...(faults.lie === true && {
      liar: {
        onPrompt(promptTokens, scope) {
          const stored = liarStoredEvent(promptTokens, o.engineConfig.blockSize, scope);
          if (stored !== null) publisher?.publish([stored]);
        },
      },
    }),
    servedModelName: o.servedModelName,
    servedModelNames: o.servedModelNames,
    modelName: o.modelName,
    maxModelLen: o.maxModelLen,
    createdS: Math.floor(Date.now() / 1000),
    speedup: o.speedup,
    seed: o.seed,
    limits: {
      maxLogprobs: o.maxLogprobs,
      vocabSize: tokenizer.vocabSize,
      enableAutoToolChoice: o.enableAutoToolChoice,
      toolCallParser: o.toolCallParser,
    },
    nextEngineId: () => `req-${++engineIds}`,
    adapters,
    streamLimits: o.streamLimits,
    ...(real && { output: real.output }),
  };
}

/** The server's routes: vLLM's API, the transfer routes, runtime LoRA, health and metrics. */
function engineRoutes(
  o: ResolvedEngineOptions,
  transfers: ServerTransfers | null,
  status: {
    healthy(): boolean;
    metricsText(): Promise<string>;
    contentType(): string;
  },
): Record<string, Route> {
  return {
    '/v1/completions': { method: 'POST', handle: handlers.completions },
    '/v1/chat/completions': { method: 'POST', handle: handlers.chatCompletions },
    '/tokenize': { method: 'POST', handle: handlers.tokenize },
    '/detokenize': { method: 'POST', handle: handlers.detokenize },
    '/v1/models': { method: 'GET', handle: handlers.models },
    ...transfers?.routes,
    ...(o.allowRuntimeLoraUpdating && {
      '/v1/load_lora_adapter': {
        method: 'POST',
        handle: (c: handlers.HandlerContext, body: unknown, res: ServerResponse) =>
          loadLoraAdapter(c.adapters, body, res),
      },
      '/v1/unload_lora_adapter': {
        method: 'POST',
        handle: (c: handlers.HandlerContext, body: unknown, res: ServerResponse) =>
          unloadLoraAdapter(c.adapters, body, res),
      },
    }),
    '/health': {
      method: 'GET',
      handle: (_ctx, res) => {
        res.writeHead(status.healthy() ? 200 : 503, { 'content-length': 0 });
        res.end();
      },
    },
    '/metrics': {
      method: 'GET',
      handle: async (_ctx, res) => {
        const text = await status.metricsText();
        res.writeHead(200, { 'content-type': status.contentType() });
        res.end(text);
      },
    },
  };
}

function requireLlamaCppOptions(options: EngineServerOptions): LlamaCppServerOptions {
  if (!options.llamaCpp?.gguf) {
    throw new EngineError('ERR_CONFIG', '--runtime llama.cpp needs --gguf FILE');
  }
  return options.llamaCpp;
}
