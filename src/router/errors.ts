/** Router errors carry a stable string code; the gateway edge maps codes to HTTP statuses. */
export type RouterErrorCode =
  | 'ERR_NO_HEALTHY_REPLICA'
  | 'ERR_UNKNOWN_REPLICA'
  | 'ERR_DUPLICATE_REPLICA'
  | 'ERR_UNKNOWN_POLICY'
  | 'ERR_INVALID_OPTION';

export class RouterError extends Error {
  readonly code: RouterErrorCode;

  constructor(code: RouterErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'RouterError';
    this.code = code;
  }
}
