/**
 * The one error shape both servers answer with, vLLM's `ErrorResponse`
 * (`vllm/entrypoints/openai/engine/protocol.py`): `{"error": {message, type, param, code}}`,
 * where `code` is the HTTP status as an integer and `type` a name in the style of vLLM's
 * `create_error_response` (`BadRequestError` 400, `NotFoundError` 404, `InternalServerError`
 * 500), which are also the error classes of the `openai` client.
 *
 * Inside, an ApiError carries a stable string code for programs and logs (`ERR_BAD_JSON`); only
 * this edge turns the code into a status, a type and headers.
 */

export type ApiErrorCode =
  | 'ERR_BAD_REQUEST'
  | 'ERR_BAD_JSON'
  | 'ERR_CONTEXT_LENGTH'
  | 'ERR_NEVER_FITS'
  | 'ERR_UNAUTHORIZED'
  | 'ERR_FORBIDDEN'
  | 'ERR_MODEL_NOT_FOUND'
  | 'ERR_ROUTE_NOT_FOUND'
  | 'ERR_NOT_FOUND'
  | 'ERR_CONFLICT'
  | 'ERR_METHOD_NOT_ALLOWED'
  | 'ERR_CLIENT_TIMEOUT'
  | 'ERR_BODY_TOO_LARGE'
  | 'ERR_UNSUPPORTED_ENCODING'
  | 'ERR_EXPECTATION_FAILED'
  | 'ERR_HEADERS_TOO_LARGE'
  | 'ERR_RATE_LIMITED'
  | 'ERR_INTERNAL'
  | 'ERR_UPSTREAM'
  | 'ERR_UNAVAILABLE'
  | 'ERR_NO_HEALTHY_BACKEND';

/** Every status either server answers with on its own (upstream answers pass through as sent). */
const TYPE_BY_STATUS = {
  400: 'BadRequestError',
  401: 'AuthenticationError',
  403: 'PermissionDeniedError',
  404: 'NotFoundError',
  405: 'MethodNotAllowedError',
  408: 'RequestTimeoutError',
  409: 'ConflictError',
  413: 'RequestEntityTooLargeError',
  415: 'UnsupportedMediaTypeError',
  417: 'ExpectationFailedError',
  429: 'RateLimitError',
  431: 'RequestHeaderFieldsTooLargeError',
  500: 'InternalServerError',
  502: 'BadGatewayError',
  503: 'ServiceUnavailableError',
} as const;

export type ApiStatus = keyof typeof TYPE_BY_STATUS;

const STATUS: Record<ApiErrorCode, ApiStatus> = {
  ERR_BAD_REQUEST: 400,
  ERR_BAD_JSON: 400,
  ERR_CONTEXT_LENGTH: 400,
  ERR_NEVER_FITS: 400,
  ERR_UNAUTHORIZED: 401,
  ERR_FORBIDDEN: 403,
  ERR_MODEL_NOT_FOUND: 404,
  ERR_ROUTE_NOT_FOUND: 404,
  ERR_NOT_FOUND: 404,
  ERR_CONFLICT: 409,
  ERR_METHOD_NOT_ALLOWED: 405,
  ERR_CLIENT_TIMEOUT: 408,
  ERR_BODY_TOO_LARGE: 413,
  ERR_UNSUPPORTED_ENCODING: 415,
  ERR_EXPECTATION_FAILED: 417,
  ERR_HEADERS_TOO_LARGE: 431,
  ERR_RATE_LIMITED: 429,
  ERR_INTERNAL: 500,
  ERR_UPSTREAM: 502,
  ERR_UNAVAILABLE: 503,
  ERR_NO_HEALTHY_BACKEND: 503,
};

/** Seconds a client should wait before retrying a 503. */
export const RETRY_AFTER_S = 1;

export class ApiError extends Error {
  readonly status: ApiStatus;
  /** `Retry-After` seconds for this answer (503s get RETRY_AFTER_S without it). */
  readonly retryAfterS: number | null;
  /** The body's `type` in place of the status's class name (a 429's `rate_limit_exceeded`). */
  readonly type: string | null;

  constructor(
    readonly code: ApiErrorCode,
    message: string,
    /** The offending request field, when there is one (OpenAI's `param`). */
    readonly param: string | null = null,
    options?: ApiErrorOptions,
  ) {
    super(message, options);
    this.name = 'ApiError';
    this.status = STATUS[code];
    this.retryAfterS = options?.retryAfterS ?? null;
    this.type = options?.type ?? null;
  }
}

export interface ApiErrorOptions {
  cause?: unknown;
  retryAfterS?: number;
  type?: string;
}

/** A 400 naming the request field at fault. */
export const badRequest = (message: string, param: string | null = null): ApiError =>
  new ApiError('ERR_BAD_REQUEST', message, param);

export interface ErrorInfo {
  message: string;
  type: string;
  param: string | null;
  code: number;
}

/** vLLM's `ErrorInfo`: the object under `error`, in a body or in a stream's error event. */
export function errorInfo(err: ApiError): ErrorInfo {
  return {
    message: err.message,
    type: err.type ?? TYPE_BY_STATUS[err.status],
    param: err.param,
    code: err.status,
  };
}

export interface ErrorResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Status, headers and JSON body of an error answer. */
export function errorResponse(err: ApiError): ErrorResponse {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (err.retryAfterS !== null) headers['retry-after'] = String(err.retryAfterS);
  else if (err.status === 503) headers['retry-after'] = String(RETRY_AFTER_S);
  if (err.status === 401) headers['www-authenticate'] = 'Bearer';
  // RFC 7694: a 415 for a content coding says which codings the server reads.
  if (err.code === 'ERR_UNSUPPORTED_ENCODING') headers['accept-encoding'] = 'identity';
  return { status: err.status, headers, body: JSON.stringify({ error: errorInfo(err) }) };
}
