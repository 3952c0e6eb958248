/**
 * The chat template: Llama 3's, with its markers spelled as text.
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
import type { Tokenizer } from './tokenizer.ts';

export interface ChatTurn {
  role: string;
  content: string;
}

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

const markerCache = new WeakMap<Tokenizer, Map<string, readonly number[]>>();

function marker(tokenizer: Tokenizer, text: string): readonly number[] {
  let cache = markerCache.get(tokenizer);
  if (!cache) {
    cache = new Map();
    markerCache.set(tokenizer, cache);
  }
  let ids = cache.get(text);
  if (!ids) {
    ids = tokenizer.encode(text);
    cache.set(text, ids);
  }
  return ids;
}

/** Token ids of the rendered conversation, piece by piece (see above). */
export function encodeChat(
  tokenizer: Tokenizer,
  turns: readonly ChatTurn[],
  addGenerationPrompt = true,
): number[] {
  const ids: number[] = [...marker(tokenizer, BEGIN_OF_TEXT)];
  const push = (piece: readonly number[]) => {
    for (const id of piece) ids.push(id);
  };
  for (const turn of turns) {
    push(marker(tokenizer, header(turn.role)));
    if (turn.content.length > 0) push(tokenizer.encode(turn.content));
    push(marker(tokenizer, END_OF_TURN));
  }
  if (addGenerationPrompt) push(marker(tokenizer, header('assistant')));
  return ids;
}
