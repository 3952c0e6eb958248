/**
 * A small byte-level BPE model folder, written for tests that need a tokenizer fast: GPT-2's 256
 * byte characters, the merges that spell a few English words, three Llama-3-style special tokens,
 * Llama 3's pre-tokenizer (llama.cpp's `llama-bpe`) or GPT-2's (`gpt-2`), a BOS step when asked and a
 * one-line chat template.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BYTE_CHARS } from '../../src/tokenizer/byteLevel.ts';

export const TINY_WORDS = ['the', 'and', 'hello', 'world', 'token', 'cache', 'model', 'llama'];
export const TINY_SPECIALS = ['<|begin_of_text|>', '<|end_of_text|>', '<|eot_id|>'];
export const TINY_TEMPLATE =
  "{{ bos_token }}{% for m in messages %}<|eot_id|>{{ m['role'] }}: {{ m['content'] }}{% endfor %}";
const LLAMA3_SPLIT =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/** Writes the folder into `dir` (created) and returns it. */
export function writeTinyTokenizerFolder(
  dir: string,
  opts: { bosStep: boolean; pre?: 'llama3' | 'gpt2' },
): string {
  const vocab: Record<string, number> = {};
  BYTE_CHARS.forEach((c, id) => {
    vocab[c] = id;
  });
  const merges: [string, string][] = [];
  for (const word of TINY_WORDS.flatMap((w) => [w, `Ġ${w}`])) {
    const chars = Array.from(word);
    let left = chars[0]!;
    for (const c of chars.slice(1)) {
      const merged = left + c;
      if (vocab[merged] === undefined) {
        merges.push([left, c]);
        vocab[merged] = Object.keys(vocab).length;
      }
      left = merged;
    }
  }
  const firstSpecial = Object.keys(vocab).length;
  const added = TINY_SPECIALS.map((content, i) => ({
    id: firstSpecial + i,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  }));
  const byteLevel = {
    type: 'ByteLevel',
    add_prefix_space: false,
    trim_offsets: true,
    use_regex: false,
  };
  const tokenizerJson = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: added,
    normalizer: null,
    pre_tokenizer:
      opts.pre === 'gpt2'
        ? { ...byteLevel, use_regex: true }
        : {
            type: 'Sequence',
            pretokenizers: [
              {
                type: 'Split',
                pattern: { Regex: LLAMA3_SPLIT },
                behavior: 'Isolated',
                invert: false,
              },
              byteLevel,
            ],
          },
    post_processor: opts.bosStep
      ? {
          type: 'TemplateProcessing',
          single: [
            { SpecialToken: { id: TINY_SPECIALS[0], type_id: 0 } },
            { Sequence: { id: 'A', type_id: 0 } },
          ],
          pair: [{ Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
          special_tokens: {
            [TINY_SPECIALS[0]!]: {
              id: TINY_SPECIALS[0],
              ids: [firstSpecial],
              tokens: [TINY_SPECIALS[0]],
            },
          },
        }
      : byteLevel,
    decoder: byteLevel,
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: opts.pre !== 'gpt2', // as Llama 3's file and GPT-2's
      vocab,
      merges,
    },
  };
  const config = {
    bos_token: TINY_SPECIALS[0],
    eos_token: TINY_SPECIALS[1],
    chat_template: TINY_TEMPLATE,
    tokenizer_class: 'PreTrainedTokenizerFast',
  };
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify(tokenizerJson));
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify(config));
  return dir;
}
