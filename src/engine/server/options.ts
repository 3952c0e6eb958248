/**
 * Engine server options: what `kvroute engine` flags and `startEngineServer` callers set, with
 * defaults, resolved into the engine core's config plus what the HTTP shell needs. The engine's
 * own options and defaults are `../options.ts`'s; this file adds the server's.
 */
import type { WireFormat } from '../../kv/wire.ts';
import { replicaSpecProblem, type ReplicaSpec } from '../../model/cost.ts';
import { makeReplicaSpec } from '../../model/spec.ts';
import { ENGINE_DEFAULTS, type EngineOptions } from '../options.ts';
import { type EngineConfig, EngineError } from '../types.ts';
import type { SteppableEngine } from './driver.ts';

/** Every field optional: what is left out takes ENGINE_DEFAULTS or SERVER_DEFAULTS. */
export interface EngineServerOptions extends Partial<EngineOptions> {
  /** Interface to listen on (default 127.0.0.1). */
  host?: string;
  /** TCP port; 0 (the default) picks a free one. */
  port?: number;
  /** A full replica spec; overrides model/gpu/tp. */
  spec?: ReplicaSpec;
  /** Name clients must use in `model` (default: the catalog model name). */
  servedModelName?: string;
  /** Context window (default: the model's from the catalog). */
  maxModelLen?: number;
  /** Modeled time runs this many times faster than the wall clock (default 1). */
  speedup?: number;
  /** ZMQ PUB endpoint for KV events, e.g. tcp://*:5557; null/absent: no events (vLLM's default). */
  kvEvents?: string | null;
  /** ZMQ ROUTER endpoint for replay, e.g. tcp://*:5558. */
  kvReplay?: string | null;
  kvEventsFormat?: WireFormat;
  kvEventsTopic?: string;
  /** Batches kept for replay. */
  kvReplayBufferBatches?: number;
  /** Seeds the generated text. */
  seed?: number;
  /** The `engine` label on metrics (vLLM's engine index, default "0"). */
  engineLabel?: string;
  /** Request bodies above this are refused with 413 (default 16 MiB). */
  bodyLimitBytes?: number;
  /** 'builtin' (the default) or a model folder with tokenizer.json (vLLM's `--tokenizer`). */
  tokenizer?: string;
  /** A Jinja chat template file (vLLM's `--chat-template`); default: the tokenizer's own. */
  chatTemplate?: string | null;
  /** Builds the core (default: EngineCore); a seam for tests. */
  makeCore?: (config: EngineConfig) => SteppableEngine;
}

/** The server's own defaults (the engine's are ENGINE_DEFAULTS). */
export const SERVER_DEFAULTS = {
  host: '127.0.0.1',
  port: 0,
  speedup: 1,
  kvEventsFormat: 'map' as WireFormat,
  seed: 0,
  engineLabel: '0',
  bodyLimitBytes: 16 * 1024 * 1024,
};

export interface ResolvedEngineOptions {
  host: string;
  port: number;
  engineConfig: EngineConfig;
  modelName: string;
  servedModelName: string;
  maxModelLen: number;
  speedup: number;
  seed: number;
  engineLabel: string;
  bodyLimitBytes: number;
}

export function resolveEngineOptions(o: EngineServerOptions): ResolvedEngineOptions {
  const spec =
    o.spec ??
    makeReplicaSpec({
      model: o.model ?? ENGINE_DEFAULTS.model,
      gpu: o.gpu ?? ENGINE_DEFAULTS.gpu,
      tp: o.tp ?? ENGINE_DEFAULTS.tp,
    });
  const problem = replicaSpecProblem(spec);
  if (problem) throw new EngineError('ERR_CONFIG', problem);
  const speedup = o.speedup ?? SERVER_DEFAULTS.speedup;
  if (!(speedup > 0 && Number.isFinite(speedup))) {
    throw new EngineError('ERR_CONFIG', `speedup must be a finite number > 0, got ${speedup}`);
  }
  const maxModelLen = o.maxModelLen ?? spec.model.maxModelLen;
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
      ...(o.kvBlocks !== undefined && { kvBlocks: o.kvBlocks }),
    },
    modelName: spec.model.name,
    servedModelName: o.servedModelName ?? spec.model.name,
    maxModelLen,
    speedup,
    seed: o.seed ?? SERVER_DEFAULTS.seed,
    engineLabel: o.engineLabel ?? SERVER_DEFAULTS.engineLabel,
    bodyLimitBytes: o.bodyLimitBytes ?? SERVER_DEFAULTS.bodyLimitBytes,
  };
}
