/**
 * A chat as the template sees it: vLLM's conversation messages (text content as one string, and
 * the fields it passes through: `tool_calls` with parsed arguments, `tool_call_id`, `name`,
 * `reasoning`...) and the request's rendering options, with vLLM's defaults.
 */

/** One message; `content` is text, the rest passes to the template as given. */
export interface ChatMessage {
  role: string;
  content: string;
  [field: string]: unknown;
}

/** The plain form the builtin template reads. */
export interface ChatTurn {
  role: string;
  content: string;
}

export interface ChatInput {
  messages: ChatMessage[];
  /** End with the assistant's header, so the model answers (vLLM: true). */
  addGenerationPrompt: boolean;
  /** Leave the last message open for the model to continue (vLLM: false). */
  continueFinalMessage: boolean;
  /** The tokenizer's own special tokens on top of the template's (vLLM chat: false). */
  addSpecialTokens: boolean;
  /** Tool definitions as vLLM hands them to the template, or null. */
  tools: Record<string, unknown>[] | null;
  documents: Record<string, unknown>[] | null;
  /** `chat_template_kwargs` of the request (e.g. `enable_thinking`), visible to the template. */
  templateKwargs: Record<string, unknown>;
}

/** A chat of these messages with vLLM's default options. */
export function chatInput(
  messages: ChatMessage[],
  options: Partial<Omit<ChatInput, 'messages'>> = {},
): ChatInput {
  return {
    messages,
    addGenerationPrompt: true,
    continueFinalMessage: false,
    addSpecialTokens: false,
    tools: null,
    documents: null,
    templateKwargs: {},
    ...options,
  };
}
