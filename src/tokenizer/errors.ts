/**
 * Tokenizer errors. Setup problems (a model folder or template file that cannot be used) stop a
 * server from starting; a template that fails on one request's messages is that request's 400.
 */
export class TokenizerError extends Error {
  constructor(
    /**
     * ERR_TOKENIZER: a tokenizer.json problem; ERR_CONFIG: a model folder or chat template file
     * problem; ERR_TEMPLATE: the chat template refused or failed on a request (vLLM: 400).
     */
    readonly code: 'ERR_TOKENIZER' | 'ERR_CONFIG' | 'ERR_TEMPLATE',
    message: string,
  ) {
    super(message);
    this.name = 'TokenizerError';
  }
}
