/**
 * What the engine server answers for an error thrown while serving: API errors as they are, the
 * core's refusals as 400s, a dead core as 503, anything else as 500. The shape and the writer
 * are the shared ones (`src/openai/`).
 */
import { ApiError } from '../../openai/errors.ts';
import { EngineError } from '../types.ts';

export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if ((err as { code?: unknown })?.code === 'ERR_ENGINE_DEAD') {
    return new ApiError('ERR_UNAVAILABLE', (err as Error).message);
  }
  if (err instanceof EngineError) {
    if (err.code === 'ERR_NEVER_FITS') return new ApiError('ERR_NEVER_FITS', err.message);
    if (err.code === 'ERR_INVALID_REQUEST') return new ApiError('ERR_BAD_REQUEST', err.message);
  }
  return new ApiError('ERR_INTERNAL', `internal error: ${(err as Error)?.message ?? String(err)}`);
}
