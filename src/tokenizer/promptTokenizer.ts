/**
 * Prompts to token ids, the one contract between the gateway and the engines: the same request
 * becomes the same ids on both sides, or no block key matches. A completion prompt is encoded
 * with the model's special tokens by default (vLLM: `add_special_tokens` true); a chat is
 * rendered with the chat template and encoded without them (vLLM: false; the template writes its
 * own BOS).
 *
 * Two kinds: the builtin (cl100k_base and the builtin Llama-3-style template, encoded piece by
 * piece) for the simulated fleet, and a model folder (`--tokenizer DIR`) with its Jinja chat
 * template (or `--chat-template FILE`) for real models. `tokenize` works in slices of a few
 * milliseconds and stops once past a token limit, after a cheap length bound has had its say: a
 * 2 MB prompt is refused without holding the event loop.
 */
import { type ChatInput, chatInput, type ChatMessage } from './chat.ts';
import { chatPieces } from './chatTemplate.ts';
import { TokenizerError } from './errors.ts';
import { JinjaChatTemplate } from './jinjaChat.ts';
import { loadModelFolder, readChatTemplateFlag } from './modelFolder.ts';
import { getTokenizer, type TextTokenizer } from './tokenizer.ts';
import { getOrAdd } from '../util/getOrAdd.ts';

/** Which tokenizer and template: as the `--tokenizer` and `--chat-template` flags say. */
export interface TokenizerSpec {
  /** 'builtin', or a model folder (vLLM's `--tokenizer DIR`). */
  tokenizer: string;
  /** A template file (or a template given inline), or null for the tokenizer's own. */
  chatTemplate: string | null;
}

export const BUILTIN_TOKENIZER = 'builtin';

export type PromptInput =
  | { kind: 'completion'; text: string; addSpecialTokens: boolean }
  | { kind: 'chat'; chat: ChatInput };

export interface Tokenized {
  ids: number[];
  /** False when tokenizing stopped past the limit: the prompt has at least `atLeastTokens`. */
  complete: boolean;
  atLeastTokens: number;
}

/** Milliseconds of tokenizing between two turns of the event loop. */
export const TOKENIZE_SLICE_MS = 4;

/** vLLM's message for a chat with no template anywhere. */
const NO_TEMPLATE =
  'As of transformers v4.44, default chat template is no longer allowed, so you must provide a chat template if the tokenizer does not define one.';

interface Segment {
  text: string;
  addSpecialTokens: boolean;
}

export class PromptTokenizer {
  readonly name: string;
  readonly vocabSize: number;
  /** The underlying tokenizer (decode, token strings, single-token words). */
  readonly text: TextTokenizer;
  /** The Jinja template in use, or null: the builtin template, piece by piece. */
  readonly template: JinjaChatTemplate | null;
  readonly #specialTokens: Record<string, string>;
  /** A model folder without any template: chats are refused as vLLM refuses them. */
  readonly #noTemplate: boolean;

  constructor(
    text: TextTokenizer,
    template: JinjaChatTemplate | null,
    specialTokens: Record<string, string>,
    noTemplate = false,
  ) {
    this.name = text.name;
    this.vocabSize = text.vocabSize;
    this.text = text;
    this.template = template;
    this.#specialTokens = specialTokens;
    this.#noTemplate = noTemplate;
  }

  /** Completion prompt ids, in one go. */
  encodePrompt(text: string, addSpecialTokens = true): number[] {
    return this.encode({ kind: 'completion', text, addSpecialTokens });
  }

  /** Chat ids, in one go. */
  encodeChat(chat: ChatInput | ChatMessage[]): number[] {
    return this.encode({ kind: 'chat', chat: Array.isArray(chat) ? chatInput(chat) : chat });
  }

  encode(input: PromptInput): number[] {
    const ids: number[] = [];
    for (const s of this.#segments(input)) {
      this.text
        .encodeJob(s.text, s.addSpecialTokens, ids, Number.POSITIVE_INFINITY)
        .run(Number.POSITIVE_INFINITY);
    }
    return ids;
  }

  /** The chat as text (the builtin template's markers included). */
  renderChat(chat: ChatInput): string {
    return this.#segments({ kind: 'chat', chat })
      .map((s) => s.text)
      .join('');
  }

  /**
   * The ids, never holding the event loop for more than about TOKENIZE_SLICE_MS, and stopping
   * once there are more than `limitTokens`. Throws TokenizerError ERR_TEMPLATE when the chat
   * template refuses the messages.
   */
  async tokenize(input: PromptInput, limitTokens = Number.POSITIVE_INFINITY): Promise<Tokenized> {
    const segments = this.#segments(input);
    const perToken = this.text.maxCharsPerToken;
    if (perToken !== null && Number.isFinite(limitTokens)) {
      let chars = 0;
      for (const s of segments) chars += s.text.length;
      const atLeast = Math.ceil(chars / perToken);
      if (atLeast > limitTokens) return { ids: [], complete: false, atLeastTokens: atLeast };
    }
    const ids: number[] = [];
    for (const s of segments) {
      const job = this.text.encodeJob(s.text, s.addSpecialTokens, ids, limitTokens);
      while (!job.run(performance.now() + TOKENIZE_SLICE_MS)) await nextTurn();
      if (ids.length > limitTokens) return { ids, complete: false, atLeastTokens: ids.length };
    }
    return { ids, complete: true, atLeastTokens: ids.length };
  }

  #segments(input: PromptInput): Segment[] {
    if (input.kind === 'completion') {
      return [{ text: input.text, addSpecialTokens: input.addSpecialTokens }];
    }
    const chat = input.chat;
    if (this.template) {
      const text = this.template.render(chat, this.#specialTokens);
      return [{ text, addSpecialTokens: chat.addSpecialTokens }];
    }
    if (this.#noTemplate) throw new TokenizerError('ERR_TEMPLATE', NO_TEMPLATE);
    return chatPieces(chat.messages, chat.addGenerationPrompt, chat.continueFinalMessage).map(
      (text) => ({ text, addSpecialTokens: false }),
    );
  }
}

function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

const byKey = new Map<string, PromptTokenizer>();

/**
 * The prompt tokenizer for these flags, built once per process: gateways and engines in one
 * process share it. Throws TokenizerError (ERR_CONFIG, ERR_TOKENIZER) when a file is unusable.
 */
export function loadPromptTokenizer(spec: TokenizerSpec): PromptTokenizer {
  const key = `${spec.tokenizer}\u0000${spec.chatTemplate ?? ''}`;
  return getOrAdd(byKey, key, () => makePromptTokenizer(spec));
}

function makePromptTokenizer(spec: TokenizerSpec): PromptTokenizer {
  const flag = spec.chatTemplate === null ? null : readChatTemplateFlag(spec.chatTemplate);
  const override = flag ? new JinjaChatTemplate(flag.source, flag.origin) : null;
  if (spec.tokenizer === BUILTIN_TOKENIZER)
    return new PromptTokenizer(getTokenizer(), override, {});
  const folder = loadModelFolder(spec.tokenizer);
  const template =
    override ??
    (folder.template === null
      ? null
      : new JinjaChatTemplate(folder.template, folder.templateOrigin));
  return new PromptTokenizer(folder.tokenizer, template, folder.specialTokens, template === null);
}
