/**
 * Envoy's side of ext_proc, independent of kvroute's own (src/epp/dataPlane.ts, protos.ts): the
 * vendored protos under proto/ loaded by protobufjs reflection, messages written by FIELD NUMBER
 * (as `external_processor.proto`, `base.proto` and `struct.proto` number them) and encoded to
 * bytes here, and every answer's bytes checked field by field against the definitions before
 * decoding: a field number the definition does not have fails. A field misnamed in kvroute on
 * both sides (which protobufjs would drop without a word when given names) cannot pass.
 *
 * Numbers used (external_processor.proto): ProcessingRequest request_headers 2,
 * response_headers 3, request_body 4, response_body 5, metadata_context 8, protocol_config 11;
 * HttpHeaders headers 1, end_of_stream 3; HttpBody body 1, end_of_stream 2;
 * ProtocolConfiguration request_body_mode 1, response_body_mode 2 (BodySendMode, processing_mode
 * .proto: NONE 0, STREAMED 1, BUFFERED 2, BUFFERED_PARTIAL 3, FULL_DUPLEX_STREAMED 4).
 * base.proto: HeaderMap headers 1; HeaderValue key 1, value 2, raw_value 3; Metadata
 * filter_metadata 1. struct.proto: Struct fields 1; Value string_value 3, list_value 6;
 * ListValue values 1.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { credentials, makeGenericClientConstructor } from '@grpc/grpc-js';
import protobuf from 'protobufjs';

const PROTO_DIR = fileURLToPath(new URL('../../proto', import.meta.url));

let root: protobuf.Root | null = null;

function protos(): protobuf.Root {
  if (root) return root;
  const r = new protobuf.Root();
  r.resolvePath = (_origin, target) =>
    target.startsWith('google/protobuf/') ? target : join(PROTO_DIR, target);
  r.loadSync('envoy/service/ext_proc/v3/external_processor.proto', { keepCase: true });
  r.resolveAll();
  root = r;
  return r;
}

export const PROCESSING_REQUEST = 'envoy.service.ext_proc.v3.ProcessingRequest';
export const PROCESSING_RESPONSE = 'envoy.service.ext_proc.v3.ProcessingResponse';

/** BodySendMode by number (processing_mode.proto). */
export const BODY_MODE = {
  NONE: 0,
  STREAMED: 1,
  BUFFERED: 2,
  BUFFERED_PARTIAL: 3,
  FULL_DUPLEX_STREAMED: 4,
} as const;

/** A message written by field number: `{2: {...}, 11: {...}}`; nested messages likewise. */
export type ByNumber = { [field: number]: unknown };

function typeOf(name: string): protobuf.Type {
  return protos().lookupType(name);
}

/** Turns a by-number spec into protobufjs' named object, throwing on a number not defined. */
function named(type: protobuf.Type, spec: ByNumber): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(spec)) {
    const f = type.fieldsById[Number(key)];
    if (!f) throw new TypeError(`${type.fullName} has no field ${key}`);
    const sub = f.resolvedType instanceof protobuf.Type ? f.resolvedType : null;
    const one = (v: unknown) => (sub ? named(sub, v as ByNumber) : v);
    if (f.map) {
      out[f.name] = Object.fromEntries(
        Object.entries(value as Record<string, unknown>).map(([k, v]) => [k, one(v)]),
      );
    } else if (f.repeated) out[f.name] = (value as unknown[]).map(one);
    else out[f.name] = one(value);
  }
  return out;
}

/** The bytes of a message written by field number. */
export function encodeByNumber(typeName: string, spec: ByNumber): Uint8Array {
  const type = typeOf(typeName);
  const object = named(type, spec);
  const problem = type.verify(object);
  if (problem) throw new TypeError(`${typeName}: ${problem}`);
  return type.encode(type.fromObject(object)).finish();
}

/** Throws on any field number in `bytes` that `type` does not define, at any depth. */
export function assertKnownFields(type: protobuf.Type, bytes: Uint8Array, path = ''): void {
  const reader = protobuf.Reader.create(bytes);
  while (reader.pos < reader.len) {
    const tag = reader.uint32();
    const id = tag >>> 3;
    const wire = tag & 7;
    const f = type.fieldsById[id];
    if (!f) throw new TypeError(`${path || type.fullName}: unknown field number ${id}`);
    const where = `${path || type.fullName}.${f.name}`;
    if (wire === 2 && (f.map || f.resolvedType instanceof protobuf.Type)) {
      const inner = reader.bytes();
      if (f.map) {
        // A map entry: key = 1, value = 2.
        const entry = protobuf.Reader.create(inner);
        while (entry.pos < entry.len) {
          const t = entry.uint32();
          if (t >>> 3 === 2 && f.resolvedType instanceof protobuf.Type) {
            assertKnownFields(f.resolvedType, entry.bytes(), `${where}{}`);
          } else if (t >>> 3 === 1 || t >>> 3 === 2) entry.skipType(t & 7);
          else throw new TypeError(`${where}: map entry field ${t >>> 3}`);
        }
      } else assertKnownFields(f.resolvedType as protobuf.Type, inner, where);
    } else reader.skipType(wire);
  }
}

/** A ProcessingResponse's bytes: checked against the definition, then decoded (oneofs named). */
// biome-ignore lint/suspicious/noExplicitAny: a decoded message, read by the tests' assertions
export function decodeResponse(bytes: Uint8Array): any {
  const type = typeOf(PROCESSING_RESPONSE);
  assertKnownFields(type, bytes);
  return type.toObject(type.decode(bytes), {
    oneofs: true,
    enums: String,
    longs: String,
    defaults: true,
  });
}

const identity = (b: Buffer): Buffer => b;

/** A client of the ExternalProcessor service that sends and receives raw bytes. */
export function envoyClient(address: string) {
  const Client = makeGenericClientConstructor(
    {
      Process: {
        path: '/envoy.service.ext_proc.v3.ExternalProcessor/Process',
        requestStream: true,
        responseStream: true,
        requestSerialize: identity,
        requestDeserialize: identity,
        responseSerialize: identity,
        responseDeserialize: identity,
      },
    },
    'ExternalProcessor',
  );
  return new Client(address, credentials.createInsecure());
}

/** One ext_proc stream as Envoy drives it: requests written by number, answers checked. */
export class EnvoyStream {
  // biome-ignore lint/suspicious/noExplicitAny: grpc-js' duplex call over raw bytes
  readonly #call: any;
  // biome-ignore lint/suspicious/noExplicitAny: decoded answers
  readonly #queue: any[] = [];
  // biome-ignore lint/suspicious/noExplicitAny: decoded answers
  #waiter: ((r: any) => void) | null = null;
  #failure: Error | null = null;
  #done = false;
  readonly status: Promise<{ code: number; details: string }>;

  constructor(client: ReturnType<typeof envoyClient>) {
    // biome-ignore lint/suspicious/noExplicitAny: the generic client's method
    this.#call = (client as any).Process();
    this.#call.on('data', (bytes: Buffer) => {
      let r: unknown;
      try {
        r = decodeResponse(bytes);
      } catch (err) {
        this.#failure = err as Error;
        r = null;
      }
      if (this.#waiter) {
        const w = this.#waiter;
        this.#waiter = null;
        w(r);
      } else this.#queue.push(r);
    });
    this.status = new Promise((resolve) => {
      this.#call.on('status', (s: { code: number; details: string }) =>
        resolve({ code: s.code, details: s.details }),
      );
    });
    this.#call.on('error', () => {});
    const finish = () => {
      this.#done = true;
      this.#waiter?.(null);
      this.#waiter = null;
    };
    this.#call.on('end', finish);
    this.#call.on('close', finish);
  }

  /** Sends a ProcessingRequest written by field number. */
  send(request: ByNumber): void {
    this.#call.write(Buffer.from(encodeByNumber(PROCESSING_REQUEST, request)));
  }

  /** The next answer, decoded; null when the picker ended the stream. */
  // biome-ignore lint/suspicious/noExplicitAny: a decoded answer
  async next(timeoutMs = 120_000): Promise<any> {
    const r = await (this.#queue.length > 0
      ? this.#queue.shift()
      : this.#done
        ? null
        : new Promise((resolve, reject) => {
            const timer = setTimeout(() => {
              this.#waiter = null;
              reject(new Error(`no ext_proc answer within ${timeoutMs} ms`));
            }, timeoutMs);
            this.#waiter = (v) => {
              clearTimeout(timer);
              resolve(v);
            };
          }));
    if (this.#failure) throw this.#failure;
    return r;
  }

  end(): void {
    this.#call.end();
  }

  cancel(): void {
    this.#call.cancel();
  }
}

// --- ProcessingRequest pieces, by number ------------------------------------------------------

/** HttpHeaders{headers: HeaderMap{headers: [HeaderValue{key, raw_value}]}, end_of_stream}. */
export function httpHeaders(headers: Record<string, string>, endOfStream = false): ByNumber {
  return {
    1: { 1: Object.entries(headers).map(([key, v]) => ({ 1: key, 3: Buffer.from(v) })) },
    3: endOfStream,
  };
}

/** HttpBody{body, end_of_stream}. */
export const httpBody = (body: Uint8Array, endOfStream: boolean): ByNumber => ({
  1: body,
  2: endOfStream,
});

/** Metadata{filter_metadata: {namespace: Struct}} from Struct specs by number. */
export const metadata = (filterMetadata: Record<string, ByNumber>): ByNumber => ({
  1: filterMetadata,
});

/** Struct{fields: {key: Value{string_value}}}. */
export const stringStruct = (key: string, value: string): ByNumber => ({
  1: { [key]: { 3: value } },
});

/** Struct{fields: {key: Value{list_value: ListValue{values: [Value{string_value}]}}}}. */
export const listStruct = (key: string, values: readonly string[]): ByNumber => ({
  1: { [key]: { 6: { 1: values.map((v) => ({ 3: v })) } } },
});

/** The first message of a request: request_headers (2) and protocol_config (11). */
export function requestHeaders(
  path: string,
  options: {
    mode?: keyof typeof BODY_MODE;
    responseMode?: keyof typeof BODY_MODE;
    headers?: Record<string, string>;
    metadata?: Record<string, ByNumber>;
    endOfStream?: boolean;
  } = {},
): ByNumber {
  const mode = BODY_MODE[options.mode ?? 'FULL_DUPLEX_STREAMED'];
  return {
    2: httpHeaders(
      {
        ':authority': 'gateway.local',
        ':method': options.endOfStream ? 'GET' : 'POST',
        ':path': path,
        ':scheme': 'http',
        'content-type': 'application/json',
        ...options.headers,
      },
      options.endOfStream ?? false,
    ),
    11: {
      1: mode,
      2: options.responseMode === undefined ? mode : BODY_MODE[options.responseMode],
    },
    ...(options.metadata && { 8: metadata(options.metadata) }),
  };
}

/** The subset hint: envoy.lb.subset_hint / x-gateway-destination-endpoint-subset. */
export const subsetMetadata = (endpoints: readonly string[]): Record<string, ByNumber> => ({
  'envoy.lb.subset_hint': listStruct('x-gateway-destination-endpoint-subset', endpoints),
});

/** The served endpoint: envoy.lb / x-gateway-destination-endpoint-served. */
export const servedMetadata = (endpoint: string): Record<string, ByNumber> => ({
  'envoy.lb': stringStruct('x-gateway-destination-endpoint-served', endpoint),
});

/** The HTTP status of an immediate response's decoded `status.code` (envoy.type.v3.StatusCode). */
export function statusCodeOf(name: string | number): number {
  if (typeof name === 'number') return name;
  const value = protos().lookupEnum('envoy.type.v3.StatusCode').values[name];
  if (value === undefined) throw new TypeError(`no envoy.type.v3.StatusCode named ${name}`);
  return value;
}

/** A header value of a decoded `set_headers` list (raw_value first). */
// biome-ignore lint/suspicious/noExplicitAny: a decoded answer
export function setHeader(response: any, key: string): string | undefined {
  // biome-ignore lint/suspicious/noExplicitAny: decoded HeaderValueOptions
  const set: any[] = response?.response?.header_mutation?.set_headers ?? [];
  const h = set.find((o) => o.header.key.toLowerCase() === key.toLowerCase())?.header;
  if (!h) return undefined;
  return h.raw_value?.length > 0 ? Buffer.from(h.raw_value).toString('utf8') : h.value;
}
