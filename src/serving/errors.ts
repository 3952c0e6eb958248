/**
 * Gateway errors. Setup problems (a bad config key or flag) are GatewayErrors with a stable code
 * and the offending key; request problems are the shared ApiErrors (`src/openai/errors.ts`), and
 * only the HTTP edge turns either into an answer.
 */
import { ApiError, type ErrorResponse, errorResponse } from '../openai/errors.ts';

export class GatewayError extends Error {
  /** Which config key or flag was wrong. */
  readonly param: string | null;

  constructor(
    readonly code: 'ERR_CONFIG',
    message: string,
    options?: { param?: string },
  ) {
    super(message);
    this.name = 'GatewayError';
    this.param = options?.param ?? null;
  }
}

/** Any error thrown while serving, as an ApiError; internals are not told to the client. */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if ((err as { code?: unknown })?.code === 'ERR_NO_HEALTHY_REPLICA') {
    return new ApiError('ERR_NO_HEALTHY_BACKEND', (err as Error).message, null, { cause: err });
  }
  return new ApiError('ERR_INTERNAL', 'internal error', null, { cause: err });
}

/** Status, headers and body for an error thrown anywhere in the pipeline. */
export function toErrorResponse(err: unknown): ErrorResponse {
  return errorResponse(toApiError(err));
}
