/**
 * An OpenAI `messages` list into the conversation a chat template sees, as vLLM builds it
 * (`vllm/entrypoints/chat_utils.py`, `_parse_chat_message_content` and `_postprocess_messages`):
 * text parts joined with newlines (vLLM's "string" content format), and the fields vLLM passes
 * on: an assistant's `tool_calls` (arguments parsed from JSON, `{}` when they do not parse; an
 * empty list dropped) and `reasoning`, a tool message's `tool_call_id`, any `name`. Shared by the
 * engine server and the gateway, so both render exactly the same chats.
 */
import type { ChatMessage } from '../tokenizer/chat.ts';
import { badRequest } from './errors.ts';

/** Content part types whose text vLLM keeps, and the field holding it. */
const TEXT_PARTS: Record<string, string> = {
  text: 'text',
  input_text: 'text',
  output_text: 'text',
  refusal: 'refusal',
  thinking: 'thinking',
};

export function parseChatMessages(raw: unknown): ChatMessage[] {
  if (raw === undefined || raw === null) throw badRequest("'messages' is required", 'messages');
  if (!Array.isArray(raw) || raw.length === 0) {
    throw badRequest("'messages' must be a non-empty list", 'messages');
  }
  return raw.map((m, i) => {
    if (typeof m !== 'object' || m === null || Array.isArray(m)) {
      throw badRequest(`messages[${i}] must be an object`, 'messages');
    }
    const msg = m as Record<string, unknown>;
    const role = msg.role;
    if (typeof role !== 'string' || role.length === 0) {
      throw badRequest(`messages[${i}].role must be a non-empty string`, 'messages');
    }
    const out: ChatMessage = { role, content: contentText(msg.content, i) };
    if (role === 'assistant') {
      const toolCalls = toolCallsOf(msg.tool_calls, i);
      if (toolCalls) out.tool_calls = toolCalls;
      if (msg.reasoning !== undefined && msg.reasoning !== null) {
        out.reasoning = msg.reasoning;
        out.reasoning_content = msg.reasoning;
      }
    } else if (role === 'tool' && 'tool_call_id' in msg) out.tool_call_id = msg.tool_call_id;
    if (typeof msg.name === 'string') out.name = msg.name;
    if (typeof msg.task === 'string') out.task = msg.task;
    if (role === 'developer') out.tools = msg.tools ?? null;
    return out;
  });
}

/** String content, or text parts joined with newlines; other parts (images, audio) are refused. */
function contentText(raw: unknown, i: number): string {
  if (raw === undefined || raw === null) return '';
  if (typeof raw === 'string') return raw;
  if (!Array.isArray(raw)) {
    throw badRequest(`messages[${i}].content must be a string or a list of text parts`, 'messages');
  }
  const texts: string[] = [];
  raw.forEach((part, j) => {
    if (typeof part === 'string') {
      texts.push(part);
      return;
    }
    const p = (part ?? {}) as Record<string, unknown>;
    // An own key only: a type such as "constructor" names no part.
    const field =
      typeof p.type === 'string' && Object.hasOwn(TEXT_PARTS, p.type)
        ? TEXT_PARTS[p.type]
        : undefined;
    if (field === undefined) {
      throw badRequest(`messages[${i}].content[${j}] must be a text part`, 'messages');
    }
    const text = p[field];
    if (text === undefined || text === null) return;
    if (typeof text !== 'string') {
      throw badRequest(`messages[${i}].content[${j}].${field} must be a string`, 'messages');
    }
    texts.push(text);
  });
  return texts.join('\n');
}

/** Tool calls with parsed arguments, as tool-use templates expect them; null when none. */
function toolCallsOf(raw: unknown, i: number): Record<string, unknown>[] | null {
  if (raw === undefined || raw === null) return null;
  if (!Array.isArray(raw)) throw badRequest(`messages[${i}].tool_calls must be a list`, 'messages');
  if (raw.length === 0) return null;
  return raw.map((call, j) => {
    const c = call as Record<string, unknown> | null;
    const fn = c?.function;
    if (typeof fn !== 'object' || fn === null || Array.isArray(fn)) {
      throw badRequest(`messages[${i}].tool_calls[${j}].function must be an object`, 'messages');
    }
    return {
      ...c,
      function: { ...fn, arguments: parsedArguments((fn as { arguments?: unknown }).arguments) },
    };
  });
}

function parsedArguments(args: unknown): unknown {
  if (typeof args === 'string') {
    try {
      return JSON.parse(args) as unknown;
    } catch {
      return {};
    }
  }
  return typeof args === 'object' && args !== null ? args : {};
}
