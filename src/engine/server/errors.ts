/**
 * API errors: a stable string code for programs and logs, an HTTP status, and vLLM's error type
 * name. Only the HTTP edge (`toErrorBody`) turns them into OpenAI-style JSON, where `code` is the
 * status number as vLLM sends it.
 */
import { EngineError } from '../types.ts';

export type ApiErrorCode =
  | 'ERR_BAD_REQUEST'
  | 'ERR_BAD_JSON'
  | 'ERR_CONTEXT_LENGTH'
  | 'ERR_NEVER_FITS'
  | 'ERR_MODEL_NOT_FOUND'
  | 'ERR_ROUTE_NOT_FOUND'
  | 'ERR_METHOD_NOT_ALLOWED'
  | 'ERR_BODY_TOO_LARGE'
  | 'ERR_UNAVAILABLE'
  | 'ERR_INTERNAL';

const STATUS: Record<ApiErrorCode, number> = {
  ERR_BAD_REQUEST: 400,
  ERR_BAD_JSON: 400,
  ERR_CONTEXT_LENGTH: 400,
  ERR_NEVER_FITS: 400,
  ERR_MODEL_NOT_FOUND: 404,
  ERR_ROUTE_NOT_FOUND: 404,
  ERR_METHOD_NOT_ALLOWED: 405,
  ERR_BODY_TOO_LARGE: 413,
  ERR_UNAVAILABLE: 503,
  ERR_INTERNAL: 500,
};

/** vLLM's `type` strings (the Python exception class names its server reports). */
const TYPE_BY_STATUS: Record<number, string> = {
  400: 'BadRequestError',
  404: 'NotFoundError',
  405: 'MethodNotAllowedError',
  413: 'RequestEntityTooLargeError',
  500: 'InternalServerError',
  503: 'ServiceUnavailableError',
};

export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ApiErrorCode,
    message: string,
    /** The offending request field, when there is one. */
    readonly param: string | null = null,
  ) {
    super(message);
    this.status = STATUS[code];
  }
}

/** Any error thrown while serving a request, as an ApiError (engine refusals become 400s). */
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

export interface OpenAiErrorBody {
  error: { message: string; type: string; param: string | null; code: number };
}

export function toErrorBody(err: ApiError): OpenAiErrorBody {
  return {
    error: {
      message: err.message,
      type: TYPE_BY_STATUS[err.status] ?? 'InternalServerError',
      param: err.param,
      code: err.status,
    },
  };
}
