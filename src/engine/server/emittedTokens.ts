/**
 * A choice's tokens when the runtime samples them (llama.cpp): the driver offers each sampled
 * id as it is emitted, and the choice's stop rules draw it here, with its text from the model's
 * detokenizer. Positions in a distribution (rank, offset) mean nothing here and are 0.
 */
import type { TokenSource } from './choice.ts';
import type { DrawnToken } from './textGen.ts';

/** Output text one token at a time (the llama.cpp runtime's OutputText). */
export interface TextStream {
  /** The text this token completes. */
  push(tokenId: number): string;
}

export class EmittedTokens implements TokenSource {
  readonly #text: TextStream;
  #offered: number | null = null;

  constructor(text: TextStream) {
    this.#text = text;
  }

  /** The id the runtime sampled for the next token. */
  offer(tokenId: number): void {
    this.#offered = tokenId;
  }

  /** The offered token; `banned` cannot apply (it was sampled already). */
  next(): DrawnToken {
    const tokenId = this.#offered;
    if (tokenId === null) throw new Error('no sampled token was offered');
    this.#offered = null;
    const text = this.#text.push(tokenId);
    return { tokenId, text, textJson: JSON.stringify(text), rank: 0, offset: 0 };
  }
}
