/**
 * Chat template files: a small YAML of literal pieces around each turn (`{role}` and `{content}`
 * substituted), for replicas whose model renders chats differently from the builtin template.
 * Jinja templates are not supported.
 */
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import type { ChatTurn } from './chatTemplate.ts';
import { TokenizerError } from './errors.ts';

export interface ChatTemplateSpec {
  /** Text before the first turn (e.g. a BOS marker). */
  prefix: string;
  /** One turn, e.g. `<|im_start|>{role}\n{content}<|im_end|>\n`. */
  turn: string;
  /** Appended after the last turn so the model answers as the assistant. */
  generation: string;
}

export function loadChatTemplate(path: string): ChatTemplateSpec {
  let doc: unknown;
  try {
    doc = parseYaml(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new TokenizerError(
      'ERR_CONFIG',
      `--chat-template ${path}: ${(err as Error).message.split('\n')[0]}`,
    );
  }
  const d = (doc ?? {}) as Record<string, unknown>;
  if (typeof d !== 'object' || typeof d.turn !== 'string' || !d.turn.includes('{content}')) {
    throw new TokenizerError(
      'ERR_CONFIG',
      `--chat-template ${path}: expected YAML with 'turn' (containing {role} and {content}), optional 'prefix' and 'generation'`,
    );
  }
  const opt = (k: string): string => (typeof d[k] === 'string' ? (d[k] as string) : '');
  return { prefix: opt('prefix'), turn: d.turn, generation: opt('generation') };
}

export function renderWithTemplate(t: ChatTemplateSpec, turns: readonly ChatTurn[]): string {
  let text = t.prefix;
  for (const turn of turns) {
    text += t.turn.replace(/\{(role|content)\}/g, (_, k: string) =>
      k === 'role' ? turn.role : turn.content,
    );
  }
  return text + t.generation;
}
