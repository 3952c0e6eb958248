/**
 * Jinja chat templates, rendered as vLLM renders them (`vllm/renderers/hf.py` ->
 * transformers' `apply_chat_template`): the template sees `messages`, `tools`, `documents`,
 * `add_generation_prompt`, the tokenizer's special tokens that are set (`bos_token`,
 * `eos_token`...) and the request's `chat_template_kwargs` (e.g. `enable_thinking`), which win
 * over the special tokens. `continue_final_message` cuts the rendered text right after the last
 * message's content, as transformers does. `@huggingface/jinja` interprets the template (the
 * same trim_blocks / lstrip_blocks settings, `raise_exception`, `strftime_now`, `tojson`).
 */
import { Template } from '@huggingface/jinja';
import type { ChatInput } from './chat.ts';
import { TokenizerError } from './errors.ts';

/** A template source: one template, or named ones (`default`, `tool_use`...) as configs allow. */
export type TemplateSource = string | { name: string; template: string }[];

export class JinjaChatTemplate {
  /** Where the template came from, for messages. */
  readonly origin: string;
  readonly #byName: Map<string, Template>;

  constructor(source: TemplateSource, origin: string) {
    this.origin = origin;
    const named = typeof source === 'string' ? [{ name: 'default', template: source }] : source;
    this.#byName = new Map();
    for (const { name, template } of named) {
      try {
        this.#byName.set(name, new Template(template));
      } catch (err) {
        throw new TokenizerError(
          'ERR_CONFIG',
          `${origin}: chat template '${name}' does not parse: ${(err as Error).message}`,
        );
      }
    }
  }

  /** The chat as text. Throws TokenizerError ERR_TEMPLATE when the template refuses it. */
  render(chat: ChatInput, specialTokens: Readonly<Record<string, string>>): string {
    const template = this.#pick(chat.tools !== null);
    let text: string;
    try {
      text = template.render({
        ...specialTokens,
        ...chat.templateKwargs,
        messages: chat.messages,
        tools: chat.tools,
        documents: chat.documents,
        add_generation_prompt: chat.addGenerationPrompt,
      });
    } catch (err) {
      throw new TokenizerError('ERR_TEMPLATE', `chat template: ${(err as Error).message}`);
    }
    return chat.continueFinalMessage ? openFinalMessage(text, chat) : text;
  }

  /** transformers: the `tool_use` template when tools are given and one exists, else `default`. */
  #pick(withTools: boolean): Template {
    const chosen =
      (withTools ? this.#byName.get('tool_use') : undefined) ??
      this.#byName.get('default') ??
      (this.#byName.size === 1 ? [...this.#byName.values()][0] : undefined);
    if (!chosen) {
      throw new TokenizerError(
        'ERR_TEMPLATE',
        `${this.origin} has chat templates ${[...this.#byName.keys()].join(', ')} but no 'default'`,
      );
    }
    return chosen;
  }
}

/** transformers' continue_final_message: everything after the last message's content goes. */
function openFinalMessage(text: string, chat: ChatInput): string {
  const final = chat.messages.at(-1)?.content ?? '';
  const stripped = final.trim();
  const at = text.lastIndexOf(stripped);
  if (stripped.length === 0 || at < 0) {
    throw new TokenizerError(
      'ERR_TEMPLATE',
      'continue_final_message is set but the final message does not appear in the chat after applying the chat template!',
    );
  }
  const lstripped = final.trimStart();
  // The template kept the message's trailing spaces: keep them; it trimmed them: cut there.
  return text.slice(at, at + lstripped.length) === final
    ? text.slice(0, at + lstripped.length)
    : text.slice(0, at + stripped.length);
}
