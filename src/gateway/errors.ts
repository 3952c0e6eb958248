/**
 * Gateway errors carry a stable string code; only the HTTP edge (`toErrorResponse`) turns a code
 * into a status and OpenAI-style JSON, so the request pipeline never thinks in HTTP terms.
 */
export type GatewayErrorCode =
  | 'ERR_BAD_JSON'
  | 'ERR_INVALID_REQUEST'
  | 'ERR_BODY_TOO_LARGE'
  | 'ERR_UNAUTHORIZED'
  | 'ERR_NO_HEALTHY_BACKEND'
  | 'ERR_NOT_FOUND'
  | 'ERR_METHOD_NOT_ALLOWED'
  | 'ERR_UPSTREAM'
  | 'ERR_CLIENT_TIMEOUT'
  | 'ERR_CONFIG'
  | 'ERR_TOKENIZER';

export class GatewayError extends Error {
  readonly code: GatewayErrorCode;
  /** Which request field was wrong, when one was (OpenAI's `param`). */
  readonly param: string | null;

  constructor(
    code: GatewayErrorCode,
    message: string,
    options?: { cause?: unknown; param?: string },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'GatewayError';
    this.code = code;
    this.param = options?.param ?? null;
  }
}

interface EdgeMapping {
  status: number;
  type: string;
}

const EDGE: Record<GatewayErrorCode, EdgeMapping> = {
  ERR_BAD_JSON: { status: 400, type: 'invalid_request_error' },
  ERR_INVALID_REQUEST: { status: 400, type: 'invalid_request_error' },
  ERR_BODY_TOO_LARGE: { status: 413, type: 'invalid_request_error' },
  ERR_UNAUTHORIZED: { status: 401, type: 'authentication_error' },
  ERR_NO_HEALTHY_BACKEND: { status: 503, type: 'service_unavailable' },
  ERR_NOT_FOUND: { status: 404, type: 'invalid_request_error' },
  ERR_METHOD_NOT_ALLOWED: { status: 405, type: 'invalid_request_error' },
  ERR_UPSTREAM: { status: 502, type: 'upstream_error' },
  ERR_CLIENT_TIMEOUT: { status: 408, type: 'invalid_request_error' },
  ERR_CONFIG: { status: 500, type: 'server_error' },
  ERR_TOKENIZER: { status: 500, type: 'server_error' },
};

/** Seconds a client should wait before retrying when no backend can take the request. */
export const RETRY_AFTER_S = 1;

export interface ErrorResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** The OpenAI error object `{"error": {message, type, param, code}}` for any thrown value. */
export function errorObject(err: unknown): {
  message: string;
  type: string;
  param: string | null;
  code: string;
} {
  if (err instanceof GatewayError) {
    return { message: err.message, type: EDGE[err.code].type, param: err.param, code: err.code };
  }
  const code = (err as { code?: unknown })?.code;
  if (code === 'ERR_NO_HEALTHY_REPLICA') {
    return {
      message: (err as Error).message,
      type: EDGE.ERR_NO_HEALTHY_BACKEND.type,
      param: null,
      code: 'ERR_NO_HEALTHY_BACKEND',
    };
  }
  return { message: 'internal error', type: 'server_error', param: null, code: 'ERR_INTERNAL' };
}

/** Status, headers and body for an error thrown anywhere in the pipeline. */
export function toErrorResponse(err: unknown): ErrorResponse {
  const error = errorObject(err);
  const status = EDGE[error.code as GatewayErrorCode]?.status ?? 500;
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (status === 503) headers['retry-after'] = String(RETRY_AFTER_S);
  if (status === 401) headers['www-authenticate'] = 'Bearer';
  return { status, headers, body: JSON.stringify({ error }) };
}
