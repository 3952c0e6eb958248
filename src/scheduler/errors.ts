/**
 * Errors of the engine's core (scheduler, KV policy, block pool sizing), with stable codes. The
 * engine core and its servers throw the same class; the engine server turns it into a 400 body.
 */
export type EngineErrorCode =
  | 'ERR_NEVER_FITS'
  | 'ERR_INVALID_REQUEST'
  | 'ERR_DUPLICATE_ID'
  | 'ERR_CONFIG';

export class EngineError extends Error {
  constructor(
    readonly code: EngineErrorCode,
    message: string,
  ) {
    super(message);
  }
}
