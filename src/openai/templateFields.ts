/**
 * The request fields that decide how a prompt is tokenized, read as vLLM's request models read
 * them: `add_special_tokens` (completions true, chat false), and for chat `add_generation_prompt`
 * (true), `continue_final_message` (false), `chat_template_kwargs`, `tools` (as vLLM hands them to
 * the template: `{type, function: {name, description, parameters, ...}}`, unset fields as null)
 * and `documents`. A template sent with the request is refused, as vLLM refuses it without
 * `--trust-request-chat-template`. Shared by the engine's endpoints and the gateway.
 */
import { type ChatInput, chatInput } from '../tokenizer/chat.ts';
import { parseChatMessages } from './chatMessages.ts';
import { badRequest } from './errors.ts';
import { type Body, optBool } from './fields.ts';

const UNTRUSTED_TEMPLATE =
  'Chat template is passed with request, but --trust-request-chat-template is not set. Refused request with untrusted chat template.';

/** `add_special_tokens` of a completion (vLLM's default: true). */
export function completionAddSpecialTokens(body: Body): boolean {
  return optBool(body, 'add_special_tokens') ?? true;
}

/** The chat of a chat request (or a chat /tokenize body), with its rendering options. */
export function readChatInput(body: Body): ChatInput {
  const messages = parseChatMessages(body.messages);
  const addGenerationPrompt = optBool(body, 'add_generation_prompt');
  const continueFinalMessage = optBool(body, 'continue_final_message');
  if (addGenerationPrompt === true && continueFinalMessage === true) {
    throw badRequest(
      'Cannot set both `continue_final_message` and `add_generation_prompt` to True.',
      'continue_final_message',
    );
  }
  const kwargs = body.chat_template_kwargs ?? {};
  if (typeof kwargs !== 'object' || Array.isArray(kwargs)) {
    throw badRequest("'chat_template_kwargs' must be an object", 'chat_template_kwargs');
  }
  if (
    (body.chat_template !== undefined && body.chat_template !== null) ||
    'chat_template' in kwargs
  ) {
    throw badRequest(UNTRUSTED_TEMPLATE, 'chat_template');
  }
  if ('tokenize' in kwargs) {
    throw badRequest(
      "Found unexpected chat template kwargs from request: {'tokenize'}",
      'chat_template_kwargs',
    );
  }
  const templateKwargs = { ...(kwargs as Record<string, unknown>) };
  // vLLM hands reasoning_effort to the template with the kwargs.
  if (typeof body.reasoning_effort === 'string') {
    templateKwargs.reasoning_effort ??= body.reasoning_effort;
  }
  return chatInput(messages, {
    addGenerationPrompt: addGenerationPrompt ?? true,
    continueFinalMessage: continueFinalMessage ?? false,
    addSpecialTokens: optBool(body, 'add_special_tokens') ?? false,
    tools: readTools(body.tools),
    documents: readDocuments(body.documents),
    templateKwargs,
  });
}

/** vLLM's `ChatCompletionToolsParam.model_dump()`: declared fields first, then extra ones. */
function readTools(raw: unknown): Record<string, unknown>[] | null {
  if (raw === undefined || raw === null) return null;
  if (!Array.isArray(raw)) throw badRequest("'tools' must be a list", 'tools');
  return raw.map((tool, i) => {
    const t = tool as Record<string, unknown> | null;
    const fn = t?.function as Record<string, unknown> | undefined;
    if (typeof fn !== 'object' || fn === null || typeof fn.name !== 'string') {
      throw badRequest(`tools[${i}].function must be an object with a name`, 'tools');
    }
    const { type = 'function', function: _fn, ...extra } = t!;
    const { name, description = null, parameters = null, ...fnExtra } = fn;
    return { type, function: { name, description, parameters, ...fnExtra }, ...extra };
  });
}

function readDocuments(raw: unknown): Record<string, unknown>[] | null {
  if (raw === undefined || raw === null) return null;
  if (!Array.isArray(raw) || !raw.every((d) => typeof d === 'object' && d !== null)) {
    throw badRequest("'documents' must be a list of objects", 'documents');
  }
  return raw as Record<string, unknown>[];
}
