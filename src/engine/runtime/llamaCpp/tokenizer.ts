/**
 * The model file's tokenizer, as the llama.cpp runtime's prompts and `/tokenize` use it: ids from
 * llama.cpp itself (`model.tokenize(text, true)`, special tokens parsed, which equals the Hugging
 * Face tokenizer's `encode(text, {add_special_tokens: false})`), a BOS in front when the file says
 * the model adds one (`tokenizer.ggml.add_bos_token`, what vLLM's `add_special_tokens` does with
 * the same tokenizer), and the file's chat template rendered by kvroute's Jinja renderer with
 * the file's BOS and EOS strings. Text comes back through llama.cpp's detokenizer.
 */
import type { LlamaModel, Token } from 'node-llama-cpp';
import { JinjaChatTemplate } from '../../../tokenizer/jinjaChat.ts';
import { PromptTokenizer } from '../../../tokenizer/promptTokenizer.ts';
import type { Job, TextTokenizer } from '../../../tokenizer/tokenizer.ts';

class LlamaTextTokenizer implements TextTokenizer {
  readonly name: string;
  readonly vocabSize: number;
  readonly maxCharsPerToken: number | null;
  readonly #model: LlamaModel;
  readonly #strings: readonly string[];
  readonly #bos: number | null;

  constructor(model: LlamaModel, name: string) {
    this.#model = model;
    this.name = name;
    this.#strings = model.fileInfo.metadata.tokenizer?.ggml?.tokens ?? [];
    this.vocabSize = this.#strings.length;
    // Each vocabulary string spells one byte per character (byte-level BPE) or its text, so no
    // token covers more input characters than the longest string has.
    let longest = 0;
    for (const s of this.#strings) if (s.length > longest) longest = s.length;
    this.maxCharsPerToken = longest > 0 ? longest : null;
    this.#bos = model.tokens.shouldPrependBosToken ? model.tokens.bos : null;
  }

  encode(text: string, addSpecialTokens = true): number[] {
    const out: number[] = [];
    this.#encodeInto(text, addSpecialTokens, out);
    return out;
  }

  /** llama.cpp tokenizes natively in one call: the job finishes on its first run. */
  encodeJob(text: string, addSpecialTokens: boolean, out: number[], _limitTokens: number): Job {
    return {
      run: () => {
        this.#encodeInto(text, addSpecialTokens, out);
        return true;
      },
    };
  }

  decode(ids: readonly number[], skipSpecialTokens = false): string {
    return this.#model.detokenize(ids as Token[], !skipSpecialTokens);
  }

  tokenStrings(ids: readonly number[]): string[] {
    return ids.map((id) => this.#strings[id] ?? '');
  }

  #encodeInto(text: string, addSpecialTokens: boolean, out: number[]): void {
    if (addSpecialTokens && this.#bos !== null) out.push(this.#bos);
    for (const id of this.#model.tokenize(text, true)) out.push(id);
  }
}

/** Prompts and chats to ids with the model file's vocabulary and chat template. */
export function ggufPromptTokenizer(model: LlamaModel, file: string): PromptTokenizer {
  const text = new LlamaTextTokenizer(model, `gguf:${file}`);
  const source = model.fileInfo.metadata.tokenizer?.chat_template;
  const template = source
    ? new JinjaChatTemplate(source, `${file}: tokenizer.chat_template`)
    : null;
  const specialTokens: Record<string, string> = {};
  const bos = model.tokens.bosString;
  const eos = model.tokens.eosString;
  if (bos !== null) specialTokens.bos_token = bos;
  if (eos !== null) specialTokens.eos_token = eos;
  return new PromptTokenizer(text, template, specialTokens, template === null);
}

/**
 * Output text one token at a time: the whole output detokenized each time (a multi-byte
 * character may span tokens), releasing only what is complete. vLLM's incremental detokenizer
 * holds back an unfinished character the same way.
 */
export class OutputText {
  readonly #model: LlamaModel;
  readonly #ids: Token[] = [];
  #released = 0;

  constructor(model: LlamaModel) {
    this.#model = model;
  }

  /** The new text this token completes (special tokens left out, as vLLM's skip_special_tokens). */
  push(tokenId: number): string {
    this.#ids.push(tokenId as Token);
    const full = this.#model.detokenize(this.#ids, false);
    let end = full.length;
    while (end > this.#released && full.charCodeAt(end - 1) === 0xfffd) end--;
    if (end <= this.#released) return '';
    const delta = full.slice(this.#released, end);
    this.#released = end;
    return delta;
  }
}
