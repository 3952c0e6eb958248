/**
 * Prompt rendering and tokenization, the gateway's half of the contract with the engines: the
 * same text must become the same token ids here as inside the engine, or no block key matches.
 * 'builtin' is the very module kvroute's engine uses; a Hugging Face tokenizer.json (byte-level
 * BPE) serves real vLLM replicas running that model.
 */
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { type ChatTurn, getTokenizer, renderChat } from '../tokenizer/index.ts';
import { loadBpeTokenizer } from './bpe.ts';
import { GatewayError } from './errors.ts';

export interface PromptTokenizer {
  readonly name: string;
  readonly vocabSize: number;
  /** Token ids of a completion prompt. */
  encodePrompt(text: string): number[];
  /** Token ids of a chat conversation, rendered with the chat template. */
  encodeChat(turns: readonly ChatTurn[]): number[];
}

/** A chat template file: literal pieces around each turn, `{role}` and `{content}` substituted. */
export interface ChatTemplateSpec {
  /** Text before the first turn (e.g. a BOS marker). */
  prefix: string;
  /** One turn, e.g. `<|im_start|>{role}\n{content}<|im_end|>\n`. */
  turn: string;
  /** Appended after the last turn so the model answers as the assistant. */
  generation: string;
}

export function makePromptTokenizer(
  tokenizer: string,
  chatTemplatePath: string | null,
): PromptTokenizer {
  const template = chatTemplatePath === null ? null : loadChatTemplate(chatTemplatePath);
  const render = template
    ? (turns: readonly ChatTurn[]) => renderWithTemplate(template, turns)
    : (turns: readonly ChatTurn[]) => renderChat(turns);
  if (tokenizer === 'builtin') {
    const builtin = getTokenizer();
    return {
      name: builtin.name,
      vocabSize: builtin.vocabSize,
      encodePrompt: (text) => builtin.encode(text),
      encodeChat: (turns) => builtin.encode(render(turns)),
    };
  }
  const bpe = loadBpeTokenizer(tokenizer);
  return {
    name: bpe.name,
    vocabSize: bpe.vocabSize,
    // vLLM adds the BOS (post-processor) to completion prompts; a chat template writes its own.
    encodePrompt: (text) => bpe.encode(text, { addSpecialTokens: true }),
    encodeChat: (turns) => bpe.encode(render(turns), { addSpecialTokens: false }),
  };
}

export function loadChatTemplate(path: string): ChatTemplateSpec {
  let doc: unknown;
  try {
    doc = parseYaml(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new GatewayError(
      'ERR_CONFIG',
      `--chat-template ${path}: ${(err as Error).message.split('\n')[0]}`,
    );
  }
  const d = (doc ?? {}) as Record<string, unknown>;
  if (typeof d !== 'object' || typeof d.turn !== 'string' || !d.turn.includes('{content}')) {
    throw new GatewayError(
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
