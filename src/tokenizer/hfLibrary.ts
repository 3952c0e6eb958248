/**
 * The parts of `@huggingface/tokenizers` kvroute uses, typed here: the package's bundled typings
 * do not resolve under NodeNext module resolution (extensionless relative imports), so its
 * exports would be untyped. Only public members are named.
 */
import * as hfLibrary from '@huggingface/tokenizers';

export type Json = Record<string, unknown>;

export interface PreTokenizerLike {
  pre_tokenize_text(text: string, options?: { section_index?: number }): string[];
}

export interface LibraryTokenizer {
  encode(text: string, options: { add_special_tokens: boolean }): { ids: number[] };
  decode(ids: number[], options: { skip_special_tokens: boolean }): string;
  id_to_token(id: number): string | undefined;
  normalizer: { normalize(text: string): string } | null;
  model: {
    tokens_to_ids: Map<string, number>;
    unk_token_id?: number;
    unk_token?: string;
    merges: [string, string][];
    ignore_merges: boolean;
    byte_fallback: boolean;
    fuse_unk: boolean;
  };
  post_processor: {
    post_process(tokens: string[], pair: null, addSpecialTokens: boolean): { tokens: string[] };
  } | null;
}

export const library = hfLibrary as unknown as {
  Tokenizer: new (tokenizerJson: Json, config: Json) => LibraryTokenizer;
  SequencePreTokenizer: new (config: Json) => PreTokenizerLike;
  SplitPreTokenizer: new (config: Json) => PreTokenizerLike & { pattern: RegExp | null };
  ByteLevelPreTokenizer: new (config: Json) => { pattern: RegExp };
};
