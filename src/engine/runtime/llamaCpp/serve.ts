/**
 * What the engine server needs to serve with the llama.cpp runtime: the model loaded, its
 * tokenizer, the context window and the served name, the engine built over them, the output
 * text and end-of-generation ids, and how to let it all go. Refuses (EngineError ERR_CONFIG,
 * naming the flag) what this runtime does not serve.
 */
import { basename } from 'node:path';
import type { LlamaModel } from 'node-llama-cpp';
import type { PromptTokenizer } from '../../../tokenizer/promptTokenizer.ts';
import { type EngineConfig, EngineError, type StepResult } from '../../types.ts';
import { LlamaCppEngine } from './engine.ts';
import { loadGgufModel } from './load.ts';
import type { ExecutedStep } from './runtime.ts';
import { ggufPromptTokenizer, OutputText } from './tokenizer.ts';

/** The llama.cpp runtime's own server options. */
export interface LlamaCppServerOptions {
  /** The GGUF model file (`--gguf`). */
  gguf: string;
  /** CPU threads of one forward pass (`--threads`, default 1). */
  threads?: number;
  /** Idle llama.cpp sequences kept as a prefix cache beside the running ones (default: maxSeqs). */
  cacheSequences?: number;
  /** Sees each executed step beside its plan (tests). */
  onStep?: (result: StepResult, executed: ExecutedStep) => void;
  /** Record batch items' token ids in what `onStep` sees. */
  traceTokens?: boolean;
}

/** `--max-seqs` when the llama.cpp runtime is not told: a CPU runs a few sequences well. */
export const LLAMA_CPP_DEFAULT_MAX_SEQS = 4;
export const LLAMA_CPP_DEFAULT_THREADS = 1;

/** Real engines for a fleet or a stack: their model, threads, and the gateway's tokenizer. */
export interface RealEngines {
  gguf: string;
  threads: number;
  /** The tokenizer folder the gateway must use to key blocks as the engines do, or null. */
  gatewayTokenizer: string | null;
  /** Context window per sequence (default: the model's). */
  maxModelLen?: number;
}

export interface LlamaCppServing {
  model: LlamaModel;
  prompts: PromptTokenizer;
  /** The served name when none is given: the file's name without `.gguf`. */
  defaultName: string;
  /** The context window when none is given: the model's training context. */
  defaultMaxModelLen: number;
  makeEngine(config: EngineConfig, maxModelLen: number): Promise<LlamaCppEngine>;
  output: { text(): OutputText; eosTokenIds: number[] };
  dispose(): Promise<void>;
}

export async function openLlamaCpp(
  options: LlamaCppServerOptions,
  refused: {
    tokenizer?: string;
    chatTemplate?: string | null;
    enableLora?: boolean;
    speedup?: number;
  },
): Promise<LlamaCppServing> {
  if (refused.tokenizer !== undefined) {
    throw new EngineError(
      'ERR_CONFIG',
      "--tokenizer: the llama.cpp runtime tokenizes with the --gguf file's tokenizer",
    );
  }
  if (refused.chatTemplate !== undefined && refused.chatTemplate !== null) {
    throw new EngineError(
      'ERR_CONFIG',
      "--chat-template: the llama.cpp runtime uses the --gguf file's chat template",
    );
  }
  if (refused.enableLora) {
    throw new EngineError(
      'ERR_CONFIG',
      '--enable-lora: the llama.cpp runtime serves no LoRA adapters',
    );
  }
  if (refused.speedup !== undefined && refused.speedup !== 1) {
    throw new EngineError(
      'ERR_CONFIG',
      '--speedup: the llama.cpp runtime runs in real time (1 only)',
    );
  }
  const threads = options.threads ?? LLAMA_CPP_DEFAULT_THREADS;
  if (!Number.isInteger(threads) || threads < 1) {
    throw new EngineError('ERR_CONFIG', `--threads must be an integer >= 1, got ${threads}`);
  }
  const model = await loadGgufModel(options.gguf);
  const file = basename(options.gguf);
  let prompts: PromptTokenizer;
  try {
    prompts = ggufPromptTokenizer(model, file);
  } catch (err) {
    await model.dispose();
    throw new EngineError('ERR_CONFIG', `--gguf ${options.gguf}: ${(err as Error).message}`);
  }
  const eos = [model.tokens.eos, model.tokens.eot].filter(
    (t): t is NonNullable<typeof t> => t !== null,
  );
  return {
    model,
    prompts,
    defaultName: file.replace(/\.gguf$/i, ''),
    defaultMaxModelLen: model.trainContextSize,
    makeEngine: (config, maxModelLen) =>
      LlamaCppEngine.create(config, {
        model,
        threads,
        contextTokens: maxModelLen,
        ...(options.cacheSequences !== undefined && { cacheSequences: options.cacheSequences }),
        ...(options.onStep && { onStep: options.onStep }),
        traceTokens: options.traceTokens ?? false,
      }),
    output: { text: () => new OutputText(model), eosTokenIds: [...new Set(eos)] },
    dispose: () => model.dispose(),
  };
}
