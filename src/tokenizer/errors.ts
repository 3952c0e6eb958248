/** Tokenizer setup errors: a file that cannot be read or a format that is not supported. */
export class TokenizerError extends Error {
  constructor(
    /** ERR_TOKENIZER: a tokenizer.json problem; ERR_CONFIG: a chat template file problem. */
    readonly code: 'ERR_TOKENIZER' | 'ERR_CONFIG',
    message: string,
  ) {
    super(message);
    this.name = 'TokenizerError';
  }
}
