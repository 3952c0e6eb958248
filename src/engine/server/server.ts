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
  openLlamaCpp,
} from '../runtime/llamaCpp/serve.ts';
import type { PromptTokenizer } from '../../tokenizer/promptTokenizer.ts';
import { EngineError, type StepResult } from '../types.ts';
import { toApiError } from './errors.ts';
import * as handlers from './handlers.ts';
import { EngineMetrics } from './metrics.ts';
import { defaultReplayForm, type EngineServerOptions, resolveEngineOptions } from './options.ts';
import { droppedKind, liarStoredEvent, withDroppedEvents } from './faults.ts';
import { KvEventPublisher } from './publisher.ts';
import { simulatedModel } from './textGen.ts';
import { startTransfers } from '../connector/serverWiring.ts';

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

export async function startEngineServer(
  options: EngineServerOptions = {},
): Promise<EngineServerHandle> {
  const real =
    options.runtime === 'llama.cpp'
      ? await openLlamaCpp(requireLlamaCppOptions(options), {
          tokenizer: options.tokenizer,
          chatTemplate: options.chatTemplate,
          enableLora: options.enableLora,
          speedup: options.speedup,
        })
      : null;
  let o: ReturnType<typeof resolveEngineOptions>;
  let core: SteppableEngine | LlamaCppEngine;
  let prompts: PromptTokenizer;
  try {
    o = resolveEngineOptions(
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
    prompts =
      real?.prompts ??
      loadPromptTokenizer({
        tokenizer: options.tokenizer ?? BUILTIN_TOKENIZER,
        chatTemplate: options.chatTemplate ?? null,
      });
    core = real
      ? await real.makeEngine(o.engineConfig, o.maxModelLen)
      : options.makeCore
        ? options.makeCore(o.engineConfig)
        : new EngineCore(o.engineConfig);
  } catch (err) {
    await real?.dispose();
    throw err;
  }
  const llama = core instanceof LlamaCppEngine ? core : null;
  const spec = o.engineConfig.spec;
  const adapters = new AdapterRegistry(
    o.engineConfig.lora
      ? {
          loadAdapter: (name) => (core as SteppableEngine).loadAdapter?.(name),
          unloadAdapter: (name) => (core as SteppableEngine).unloadAdapter?.(name) ?? false,
        }
      : null,
  );
  // vLLM loads --lora-modules at start; a failure stops the server.
  for (const module of o.loraModules) adapters.load(module);
  const metrics = new EngineMetrics({
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
  const publisher = options.kvEvents
    ? await KvEventPublisher.open({
        endpoint: options.kvEvents,
        replayEndpoint: options.kvReplay ?? null,
        ...(options.kvEventsTopic !== undefined && { topic: options.kvEventsTopic }),
        format: options.kvEventsFormat ?? 'map',
        replayForm: options.kvReplayForm ?? defaultReplayForm(options.kvEventsFormat ?? 'map'),
        ...(options.kvReplayBufferBatches !== undefined && {
          bufferBatches: options.kvReplayBufferBatches,
        }),
        loraIdOf: (name: string) => adapters.idOf(name),
      })
    : null;
  const faults = options.faults ?? {};
  const dropped = droppedKind(faults);
  const onStepEnd = (result: StepResult, lagMs: number) => {
    metrics.observeStepLag(lagMs / 1000);
    metrics.observeIteration(result.prefillTokens + result.decodeTokens);
    publisher?.publish(withDroppedEvents(result.events, dropped));
  };
  const driver =
    llama !== null
      ? new StepLoopDriver(llama, { onStepEnd })
      : new WallClockDriver(core as SteppableEngine, { speedup: o.speedup, onStepEnd });
  let engineIds = 0;
  const tokenizer = prompts.text;
  const resetTimer =
    faults.silentResetS === undefined
      ? null
      : setInterval(
          () => (core as SteppableEngine).forgetCacheSilently?.(),
          (faults.silentResetS * 1000) / o.speedup,
        );
  resetTimer?.unref();
  const ctx: handlers.HandlerContext = {
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
  const transfers = startTransfers(options, o, core, () => port);
  ctx.kvTransfer = transfers?.context ?? null;
  // Build the output vocabulary now (the tokenizer's first encodes are slow), not on the
  // first request, whose time to first token would pay for it.
  if (real === null) simulatedModel(tokenizer);
  let closing = false;

  const routes: Record<string, Route> = {
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
        res.writeHead(closing || driver.dead ? 503 : 200, { 'content-length': 0 });
        res.end();
      },
    },
    '/metrics': {
      method: 'GET',
      handle: async (_ctx, res) => {
        const text = await metrics.text(core.counters());
        res.writeHead(200, { 'content-type': metrics.contentType });
        res.end(text);
      },
    },
  };

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

function requireLlamaCppOptions(options: EngineServerOptions): LlamaCppServerOptions {
  if (!options.llamaCpp?.gguf) {
    throw new EngineError('ERR_CONFIG', '--runtime llama.cpp needs --gguf FILE');
  }
  return options.llamaCpp;
}
