/**
 * The one tokenizer kvroute's engine server and gateway share, so both count and key the same
 * token ids for the same text.
 *
 * Choice: OpenAI's cl100k_base BPE from the `gpt-tokenizer` package (pure TypeScript, no native
 * code, no download at run time, deterministic). Llama 3's tokenizer is tiktoken-based and
 * starts from these same 100k merges (it adds 28k mostly non-English tokens), so English prompt
 * lengths come out close to what a real Llama 3 engine counts; o200k_base would load a vocabulary
 * twice the size for no gain in that fidelity.
 *
 * Text that contains a special-token string (`<|endoftext|>`) is encoded as ordinary text: a
 * prompt is data, never control.
 */
import { decode, encode, vocabularySize } from 'gpt-tokenizer/encoding/cl100k_base';

export interface Tokenizer {
  /** Stable name, reported by /tokenize and in logs. */
  readonly name: string;
  readonly vocabSize: number;
  encode(text: string): number[];
  decode(ids: readonly number[]): string;
}

const PLAIN_TEXT = { disallowedSpecial: new Set<string>() };

class Cl100kTokenizer implements Tokenizer {
  readonly name = 'cl100k_base';
  readonly vocabSize = vocabularySize;

  encode(text: string): number[] {
    return encode(text, PLAIN_TEXT);
  }

  decode(ids: readonly number[]): string {
    return decode(ids);
  }
}

let shared: Tokenizer | undefined;

/** The process-wide tokenizer (built once: its tables are large). */
export function getTokenizer(): Tokenizer {
  shared ??= new Cl100kTokenizer();
  return shared;
}
