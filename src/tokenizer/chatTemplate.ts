/**
 * The builtin chat template (the builtin tokenizer's, when no `--chat-template` is given): Llama 3's,
 * with its markers spelled as text.
 *
 *   <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>...
 *   <|start_header_id|>assistant<|end_header_id|>\n\n        (the generation prompt)
 *
 * In a real Llama 3 tokenizer the markers are single special tokens, so BPE merges never cross
 * them and a conversation that grows by one turn keeps its old token ids as a prefix: that is
 * what makes multi-turn chat hit the prefix cache. cl100k_base has no such tokens, and encoding
 * the rendered text whole would merge across the boundaries (`|>` + `<|` becomes `><|`). So
 * `encodeChat` encodes each marker and each content separately and concatenates the ids: the
 * same prefix stability, at the cost of `encodeChat(t) !== encode(renderChat(t))` in general.
 * Engine and gateway both call `encodeChat`, so they agree on every prompt's ids.
 */
import type { ChatTurn } from './chat.ts';
import type { Tokenizer } from './tokenizer.ts';

export type { ChatTurn } from './chat.ts';

export const BEGIN_OF_TEXT = '<|begin_of_text|>';
export const END_OF_TURN = '<|eot_id|>';

const header = (role: string): string => `<|start_header_id|>${role}<|end_header_id|>\n\n`;

/** The template as text (for display and /tokenize's `prompt` echo). */
export function renderChat(turns: readonly ChatTurn[], addGenerationPrompt = true): string {
  let text = BEGIN_OF_TEXT;
  for (const turn of turns) text += `${header(turn.role)}${turn.content}${END_OF_TURN}`;
  if (addGenerationPrompt) text += header('assistant');
  return text;
}

/**
 * The pieces `encodeChat` encodes one by one: markers and contents. `continueFinalMessage` leaves
 * the last turn open (no end-of-turn, no generation prompt), as vLLM's option does.
 */
export function chatPieces(
  turns: readonly ChatTurn[],
  addGenerationPrompt = true,
  continueFinalMessage = false,
): string[] {
  const pieces = [BEGIN_OF_TEXT];
  turns.forEach((turn, i) => {
    pieces.push(header(turn.role));
    if (turn.content.length > 0) pieces.push(turn.content);
    if (!(continueFinalMessage && i === turns.length - 1)) pieces.push(END_OF_TURN);
  });
  if (addGenerationPrompt && !continueFinalMessage) pieces.push(header('assistant'));
  return pieces;
}

/** Token ids of the rendered conversation, piece by piece (see above). */
export function encodeChat(
  tokenizer: Tokenizer,
  turns: readonly ChatTurn[],
  addGenerationPrompt = true,
): number[] {
  const ids: number[] = [];
  for (const piece of chatPieces(turns, addGenerationPrompt)) {
    for (const id of tokenizer.encode(piece)) ids.push(id);
  }
  return ids;
}
