/**
 * Loading llama.cpp and a GGUF model, with one plain error line (an EngineError ERR_CONFIG that
 * names the flag or the file) for what a user can get wrong: no prebuilt binary for this
 * machine, a missing file, a file llama.cpp cannot load. node-llama-cpp is imported only here,
 * and only when the llama.cpp runtime is asked for: the sim engine never loads it. llama.cpp's
 * own log goes nowhere except its last error, which the error line quotes.
 */
import { existsSync, statSync } from 'node:fs';
import type { Llama, LlamaModel } from 'node-llama-cpp';
import { EngineError } from '../../types.ts';
import { ggufHeaderProblem } from './ggufCheck.ts';

let llama: Promise<Llama> | null = null;
/** llama.cpp's last error-level log line (one process-wide log). */
let lastLogError = '';

/** The process's llama.cpp, CPU build, never built from source. */
export function loadLlamaCpp(): Promise<Llama> {
  llama ??= openLlama();
  llama.catch(() => {
    llama = null;
  });
  return llama;
}

/**
 * What `openLlama` may be given instead of the real thing (a test's seam): the module loader,
 * and whether the prebuilt binary packages are looked at (false is what a machine without
 * @node-llama-cpp/<platform> sees: node-llama-cpp's own NoBinaryFoundError).
 */
export interface OpenLlamaSeam {
  importLib?: () => Promise<typeof import('node-llama-cpp')>;
  usePrebuiltBinaries?: boolean;
}

/** A fresh llama.cpp (not the process's shared one); one error line when there is no binary. */
export async function openLlama(seam: OpenLlamaSeam = {}): Promise<Llama> {
  const noBinary = (why: string) =>
    new EngineError(
      'ERR_CONFIG',
      `--runtime llama.cpp: no llama.cpp binary for ${process.platform}-${process.arch} (${why}); it needs node-llama-cpp 3.21.1 and its CPU package @node-llama-cpp/${process.platform}-${process.arch}`,
    );
  let lib: typeof import('node-llama-cpp');
  try {
    lib = await (seam.importLib ?? (() => import('node-llama-cpp')))();
  } catch (err) {
    throw noBinary((err as Error).message.split('\n')[0]!);
  }
  try {
    return await lib.getLlama({
      build: 'never',
      gpu: false,
      ...(seam.usePrebuiltBinaries === false && { usePrebuiltBinaries: false }),
      progressLogs: false,
      logLevel: lib.LlamaLogLevel.error,
      logger: (level, message) => {
        if (level === lib.LlamaLogLevel.error || level === lib.LlamaLogLevel.fatal) {
          lastLogError = message.trim();
        }
      },
    });
  } catch (err) {
    throw noBinary((err as Error).message.split('\n')[0]!);
  }
}

/** The model in `path` (`flag` names where the path came from in error lines). */
export async function loadGgufModel(path: string, flag = '--gguf'): Promise<LlamaModel> {
  if (!existsSync(path) || !statSync(path).isFile()) {
    throw new EngineError('ERR_CONFIG', `${flag} ${path}: no such file`);
  }
  const problem = ggufHeaderProblem(path);
  if (problem !== null) throw new EngineError('ERR_CONFIG', `${flag} ${path}: ${problem}`);
  const lib = await loadLlamaCpp();
  lastLogError = '';
  try {
    // Read, not mapped: malloc'd weights can sit on huge pages (bin/hugePages.js says why).
    return await lib.loadModel({ modelPath: path, gpuLayers: 0, useMmap: false });
  } catch (err) {
    const why = lastLogError || (err as Error).message.split('\n')[0]!;
    throw new EngineError(
      'ERR_CONFIG',
      `${flag} ${path}: not a GGUF model llama.cpp can load (${why})`,
    );
  }
}
