/**
 * Validation of an OpenAI `messages` list into plain turns, shared by the engine server and the
 * gateway so both accept and render exactly the same chats.
 */
import type { ChatTurn } from '../tokenizer/chatTemplate.ts';
import { badRequest } from './errors.ts';

export function parseChatMessages(raw: unknown): ChatTurn[] {
  if (raw === undefined || raw === null) throw badRequest("'messages' is required", 'messages');
  if (!Array.isArray(raw) || raw.length === 0) {
    throw badRequest("'messages' must be a non-empty list", 'messages');
  }
  return raw.map((m, i) => {
    if (typeof m !== 'object' || m === null) {
      throw badRequest(`messages[${i}] must be an object`, 'messages');
    }
    const { role, content } = m as { role?: unknown; content?: unknown };
    if (typeof role !== 'string' || role.length === 0) {
      throw badRequest(`messages[${i}].role must be a non-empty string`, 'messages');
    }
    return { role, content: contentText(content, i) };
  });
}

/** String content, or text parts joined; other parts (images, audio) are refused. */
function contentText(raw: unknown, i: number): string {
  if (raw === undefined || raw === null) return '';
  if (typeof raw === 'string') return raw;
  if (Array.isArray(raw)) {
    return raw
      .map((part, j) => {
        const p = part as { type?: unknown; text?: unknown } | null;
        if (p && p.type === 'text' && typeof p.text === 'string') return p.text;
        throw badRequest(`messages[${i}].content[${j}] must be a text part`, 'messages');
      })
      .join('');
  }
  throw badRequest(`messages[${i}].content must be a string or a list of text parts`, 'messages');
}
