/**
 * Prompt rendering and tokenization as the gateway needs it, its half of the contract with the
 * engines: the same text must become the same token ids here as inside the engine, or no block
 * key matches. 'builtin' is the very tokenizer kvroute's engine uses; a Hugging Face
 * tokenizer.json (byte-level BPE) serves real vLLM replicas running that model.
 */
import { loadBpeTokenizer } from './bpe.ts';
import { type ChatTurn, encodeChat, renderChat } from './chatTemplate.ts';
import { loadChatTemplate, renderWithTemplate } from './templateFile.ts';
import { getTokenizer } from './tokenizer.ts';

export interface PromptTokenizer {
  readonly name: string;
  readonly vocabSize: number;
  /** Token ids of a completion prompt. */
  encodePrompt(text: string): number[];
  /** Token ids of a chat conversation, rendered with the chat template. */
  encodeChat(turns: readonly ChatTurn[]): number[];
}

/** `tokenizer`: 'builtin' or a tokenizer.json path; `chatTemplatePath`: a template file or null. */
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
      // Without a template file, exactly as the engine encodes chats: piece by piece.
      encodeChat: template
        ? (turns) => builtin.encode(render(turns))
        : (turns) => encodeChat(builtin, turns),
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
