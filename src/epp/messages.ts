/**
 * The ext_proc messages the endpoint picker reads and writes, as `@grpc/proto-loader` gives them
 * (`protos.ts`), and the names the inference extension's endpoint picker protocol fixes
 * (gateway-api-inference-extension `docs/proposals/004-endpoint-picker-protocol`, v1.0.0):
 * the destination as a header and as `envoy.lb` dynamic metadata, the subset hint and the
 * served endpoint read from the request's filter metadata. Only the fields kvroute uses are
 * typed; everything else passes unread.
 */
import { type ApiError, errorResponse } from '../openai/errors.ts';

/** The endpoint picker protocol version implemented. */
export const EPP_PROTOCOL_VERSION = 'v1.0.0';
/** Header (and `envoy.lb` metadata key) naming the picked `ip:port`. */
export const DESTINATION_HEADER = 'x-gateway-destination-endpoint';
export const DESTINATION_NAMESPACE = 'envoy.lb';
/** Response path: the endpoint that served, in `envoy.lb` (the data plane may have retried). */
export const SERVED_KEY = 'x-gateway-destination-endpoint-served';
/** Request path: the endpoints the pick must come from, when the data plane sets them. */
export const SUBSET_NAMESPACE = 'envoy.lb.subset_hint';
export const SUBSET_KEY = 'x-gateway-destination-endpoint-subset';
/**
 * Largest body chunk sent back in a `streamed_response`: the reference endpoint picker's
 * `BodyByteLimit` ("certain envoy implementations set a max of 64Kb per streamed chunk").
 */
export const BODY_CHUNK_BYTES = 62_000;

export type BodySendMode =
  | 'NONE'
  | 'STREAMED'
  | 'BUFFERED'
  | 'BUFFERED_PARTIAL'
  | 'FULL_DUPLEX_STREAMED'
  | 'GRPC';

export interface HeaderValue {
  key: string;
  value?: string;
  raw_value?: Uint8Array;
}

export interface HttpHeaders {
  headers?: { headers?: HeaderValue[] | null } | null;
  end_of_stream?: boolean;
}

export interface HttpBody {
  body?: Uint8Array;
  end_of_stream?: boolean;
}

/** google.protobuf.Value and Struct, with protobufjs' camelCase field names. */
export interface PbValue {
  stringValue?: string;
  numberValue?: number;
  boolValue?: boolean;
  structValue?: PbStruct | null;
  listValue?: { values?: PbValue[] } | null;
  kind?: string;
}
export interface PbStruct {
  fields?: Record<string, PbValue>;
}

export type RequestKind =
  | 'request_headers'
  | 'response_headers'
  | 'request_body'
  | 'response_body'
  | 'request_trailers'
  | 'response_trailers';

export interface ProcessingRequest {
  request?: RequestKind;
  request_headers?: HttpHeaders | null;
  response_headers?: HttpHeaders | null;
  request_body?: HttpBody | null;
  response_body?: HttpBody | null;
  request_trailers?: unknown;
  response_trailers?: unknown;
  metadata_context?: { filter_metadata?: Record<string, PbStruct> | null } | null;
  observability_mode?: boolean;
  protocol_config?: {
    request_body_mode?: BodySendMode;
    response_body_mode?: BodySendMode;
  } | null;
}

export interface HeaderValueOption {
  header: { key: string; raw_value: Buffer };
}

export interface CommonResponse {
  header_mutation?: { set_headers: HeaderValueOption[]; remove_headers?: string[] };
  body_mutation?:
    | { body: Buffer }
    | { streamed_response: { body: Buffer; end_of_stream: boolean } };
  clear_route_cache?: boolean;
}

export type ResponseKind = RequestKind | 'immediate_response';

/** A ProcessingResponse: exactly one of the `response` oneof's fields, maybe dynamic metadata. */
export type ProcessingResponse = {
  [K in ResponseKind]?: unknown;
} & {
  request_headers?: { response: CommonResponse };
  response_headers?: { response: CommonResponse };
  request_body?: { response: CommonResponse };
  response_body?: { response: CommonResponse };
  request_trailers?: Record<string, never>;
  response_trailers?: Record<string, never>;
  immediate_response?: {
    status: { code: number };
    headers: { set_headers: HeaderValueOption[] };
    body: Buffer;
    details: string;
  };
  dynamic_metadata?: PbStruct;
};

/** A header to set, as the reference endpoint picker writes it: `raw_value`, never `value`. */
export function headerOption(key: string, value: string): HeaderValueOption {
  return { header: { key, raw_value: Buffer.from(value) } };
}

/** Header name (lower case) -> value; Envoy sends values in `raw_value`, older ones in `value`. */
export function readHeaders(headers: HttpHeaders | null | undefined): Map<string, string> {
  const out = new Map<string, string>();
  for (const h of headers?.headers?.headers ?? []) {
    const raw = h.raw_value;
    out.set(
      h.key.toLowerCase(),
      raw && raw.length > 0 ? Buffer.from(raw).toString('utf8') : (h.value ?? ''),
    );
  }
  return out;
}

/** `{"envoy.lb": {"x-gateway-destination-endpoint": "ip:port"}}` as a Struct. */
export function destinationMetadata(endpoint: string): PbStruct {
  return {
    fields: {
      [DESTINATION_NAMESPACE]: {
        structValue: { fields: { [DESTINATION_HEADER]: { stringValue: endpoint } } },
      },
    },
  };
}

function filterMetadataValue(req: ProcessingRequest, ns: string, key: string): PbValue | null {
  return req.metadata_context?.filter_metadata?.[ns]?.fields?.[key] ?? null;
}

/**
 * The subset hint: null when the data plane set none (every endpoint of the pool is a
 * candidate), else its string entries (the reference ignores entries that are not strings).
 */
export function subsetHint(req: ProcessingRequest): string[] | null {
  const value = filterMetadataValue(req, SUBSET_NAMESPACE, SUBSET_KEY);
  if (value === null || !value.listValue) return null;
  const out: string[] = [];
  for (const v of value.listValue.values ?? []) {
    if (typeof v.stringValue === 'string' && v.kind === 'stringValue') out.push(v.stringValue);
  }
  return out;
}

/** `envoy.lb` / `x-gateway-destination-endpoint-served` of a response-path message, if any. */
export function servedEndpoint(req: ProcessingRequest): string | null {
  const value = filterMetadataValue(req, DESTINATION_NAMESPACE, SERVED_KEY);
  return value?.kind === 'stringValue' && value.stringValue ? value.stringValue : null;
}

/**
 * A body sent back in FULL_DUPLEX_STREAMED mode: `streamed_response` chunks of at most
 * BODY_CHUNK_BYTES, `end_of_stream` on the last one when `endOfStream`; an empty body is one
 * empty chunk.
 */
export function streamedBody(
  direction: 'request_body' | 'response_body',
  body: Buffer,
  endOfStream: boolean,
): ProcessingResponse[] {
  const out: ProcessingResponse[] = [];
  let at = 0;
  do {
    const end = Math.min(body.length, at + BODY_CHUNK_BYTES);
    const chunk = body.subarray(at, end);
    out.push({
      [direction]: {
        response: {
          body_mutation: {
            streamed_response: { body: chunk, end_of_stream: endOfStream && end === body.length },
          },
        },
      },
    });
    at = end;
  } while (at < body.length);
  return out;
}

/**
 * An error answered by the data plane on the picker's behalf: the status, the project's
 * OpenAI-shaped JSON body and its headers (`content-type`, `retry-after`). `details` is a
 * token without spaces, as Envoy's response code details must be.
 */
export function immediateResponse(err: ApiError): ProcessingResponse {
  const { status, headers, body } = errorResponse(err);
  return {
    immediate_response: {
      status: { code: status },
      headers: { set_headers: Object.entries(headers).map(([k, v]) => headerOption(k, v)) },
      body: Buffer.from(body),
      details: `kvroute_${err.code.toLowerCase()}`,
    },
  };
}
