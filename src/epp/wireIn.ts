/**
 * `decodeProcessingRequest(bytes)`: an `envoy.service.ext_proc.v3.ProcessingRequest` read
 * straight off the wire into the object proto-loader's deserializer makes of it (`protos.ts`'
 * options: proto field names, enums as names, bytes as Buffers, every field present with its
 * default, each set oneof naming itself), without protobufjs' reader, message instances and
 * `toObject` pass: the picker decodes one message per body chunk, both ways, so the response
 * path of a streamed answer is mostly this. Equal to protobufjs 7 on the vendored upstream
 * protos (`test/epp/epp.wireIn.test.ts`, by property), unknown fields skipped as it skips them.
 *
 * As protobufjs: a field is told by its number alone (its wire type is not checked); a repeated
 * scalar or message field met twice keeps the last; a nested message's reads stop at its own
 * length; a string running past its message's end is cut there, other truncated input throws a
 * RangeError. Where protobufjs throws on a map entry without a
 * value (its `toObject` of null), this decoder gives the value's default instead.
 */
import type { ProcessingRequest } from './messages.ts';

const EMPTY = Buffer.alloc(0);
const BODY_SEND_MODES = [
  'NONE',
  'STREAMED',
  'BUFFERED',
  'BUFFERED_PARTIAL',
  'FULL_DUPLEX_STREAMED',
  'GRPC',
] as const;
/** The oneof `request`'s members by field number, in declared order. */
const REQUEST_KINDS = [
  '',
  '',
  'request_headers',
  'response_headers',
  'request_body',
  'response_body',
  'request_trailers',
  'response_trailers',
] as const;
/** google.protobuf.Value's oneof `kind` by field number (protobufjs' camelCase names). */
const VALUE_KINDS = [
  '',
  'nullValue',
  'numberValue',
  'stringValue',
  'boolValue',
  'structValue',
  'listValue',
] as const;
const MAX_DEPTH = 100;
/** Strings up to this many bytes are decoded in JavaScript when they are ASCII. */
const SHORT_STRING_BYTES = 32;

// biome-ignore lint/suspicious/noExplicitAny: the decoded objects are proto-loader's untyped ones
type Obj = Record<string, any>;

/** The reader's state: one message is decoded at a time (synchronously), so it is shared. */
let buf: Buffer = EMPTY;
let pos = 0;
/** Where the message being read ends (reads past it throw). */
let lim = 0;

function outOfRange(): never {
  throw new RangeError('index out of range');
}

/**
 * A varint as protobufjs' `uint32` reads it: the low 32 bits. With 5 bytes or more left, the
 * 5th byte's continuation skips 5 more bytes unread (a 64-bit varint's upper bits); nearer the
 * end, at most 4 bytes.
 */
function u32(): number {
  if (lim - pos < 5) {
    let v = 0;
    for (let i = 0; i < 4; i++) {
      if (pos >= lim) outOfRange();
      const b = buf[pos++]!;
      v = (v | ((b & 127) << (i * 7))) >>> 0;
      if (b < 128) return v;
    }
    outOfRange();
  }
  let b = buf[pos++]!;
  let v = b & 127;
  if (b < 128) return v;
  for (let shift = 7; shift < 28; shift += 7) {
    b = buf[pos++]!;
    v |= (b & 127) << shift;
    if (b < 128) return v >>> 0;
  }
  b = buf[pos++]!;
  v |= (b & 15) << 28;
  if (b < 128) return v >>> 0;
  if ((pos += 5) > lim) outOfRange();
  return v >>> 0;
}

function end(): number {
  const length = u32();
  const e = pos + length;
  if (e > lim) outOfRange();
  return e;
}

/** A string; one longer than its message is cut at the message's end (protobufjs' reader). */
function string(): string {
  const length = u32();
  const e = Math.min(pos + length, lim);
  let s = '';
  if (e - pos <= SHORT_STRING_BYTES) {
    // A short ASCII string (header names, most values) without a call into the runtime.
    for (let i = pos; i < e; i++) {
      const c = buf[i]!;
      if (c >= 0x80) {
        s = utf8Slice(pos, e);
        break;
      }
      s += String.fromCharCode(c);
    }
  } else s = utf8Slice(pos, e);
  pos = e;
  return s;
}

/** Buffer's UTF-8 decoding (invalid bytes as U+FFFD), as protobufjs' reader calls it. */
const utf8Slice = (start: number, end: number): string =>
  (buf as unknown as { utf8Slice(s: number, e: number): string }).utf8Slice(start, end);

function bytes(): Buffer {
  const e = end();
  const b = e === pos ? EMPTY : buf.subarray(pos, e);
  pos = e;
  return b;
}

function double(): number {
  if (pos + 8 > lim) outOfRange();
  const v = buf.readDoubleLE(pos);
  pos += 8;
  return v;
}

function skip(wireType: number, depth: number): void {
  switch (wireType) {
    case 0:
      do if (pos >= lim) outOfRange();
      while (buf[pos++]! & 128);
      return;
    case 1:
      if ((pos += 8) > lim) outOfRange();
      return;
    case 2:
      pos = end();
      return;
    case 3: {
      if (depth > MAX_DEPTH) throw new Error('maximum nesting depth exceeded');
      for (let t = u32() & 7; t !== 4; t = u32() & 7) skip(t, depth + 1);
      return;
    }
    case 5:
      if ((pos += 4) > lim) outOfRange();
      return;
    default:
      throw new Error(`invalid wire type ${wireType} at offset ${pos}`);
  }
}

/** Reads one length-delimited message with `read` inside its own bounds. */
function nested<T>(read: (depth: number) => T, depth: number): T {
  if (depth > MAX_DEPTH) throw new Error('maximum nesting depth exceeded');
  const e = end();
  const outer = lim;
  lim = e;
  const value = read(depth);
  lim = outer;
  return value;
}

/** A map entry (`key = 1`, `value = 2`) into `into`. */
function mapEntry(
  into: Obj,
  value: (depth: number) => unknown,
  empty: () => unknown,
  depth: number,
) {
  nested(() => {
    let key = '';
    let v: unknown = null;
    while (pos < lim) {
      const t = u32();
      const field = t >>> 3;
      if (field === 1) key = string();
      else if (field === 2) v = value(depth + 1);
      else skip(t & 7, depth);
    }
    setKey(into, key, v ?? empty());
  }, depth);
}

function setKey(into: Obj, key: string, value: unknown): void {
  if (key === '__proto__') {
    Object.defineProperty(into, key, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  } else into[key] = value;
}

/** How one field is read into its message's object `m` (`depth`: the message's own). */
type FieldRead = (m: Obj, depth: number) => void;
/** A message read up to its end, at nesting `depth`. */
type Reader = (depth: number) => Obj;

/** A message as this decoder reads it. */
interface MessageSpec {
  /** The object with every field at its default (proto-loader's `defaults: true`). */
  empty: () => Obj;
  /** Each declared field's read, by field number; any other number is skipped. */
  fields: Readonly<Record<number, FieldRead>>;
  /** Its oneof: the property naming the member set, and the members' names by field number. */
  oneof?: { name: string; members: readonly string[] };
}

/** The reader of a message: its fields as they come, each read by its number alone. */
function message(spec: MessageSpec): Reader {
  const { empty, oneof } = spec;
  // A dense array by field number: one kind of lookup for every message.
  const last = Math.max(...Object.keys(spec.fields).map(Number));
  const fields = Array.from({ length: last + 1 }, (_, n) => spec.fields[n]);
  return (depth) => {
    const m = empty();
    let kind = 0;
    while (pos < lim) {
      const t = u32();
      const field = t >>> 3;
      const read = fields[field];
      if (read === undefined) {
        skip(t & 7, depth);
        continue;
      }
      read(m, depth);
      if (oneof?.members[field] && field > kind) kind = field;
    }
    // protobufjs' toObject names the last declared member present.
    if (oneof !== undefined && kind > 0) m[oneof.name] = oneof.members[kind];
    return m;
  };
}

/** A scalar field (`read` takes its value off the wire). */
const scalar =
  (name: string, read: () => unknown): FieldRead =>
  (m) => {
    m[name] = read();
  };
/** A message field. */
const sub =
  (name: string, read: Reader): FieldRead =>
  (m, depth) => {
    m[name] = nested(read, depth + 1);
  };
/** A repeated message field: each occurrence appended. */
const repeated =
  (name: string, read: Reader): FieldRead =>
  (m, depth) => {
    m[name].push(nested(read, depth + 1));
  };
/** A map field of messages: each entry set into the map (`empty`: a value the entry lacks). */
const mapOf = (name: string, value: Reader, empty: () => Obj): FieldRead => {
  const valueIn = (depth: number): Obj => nested(value, depth);
  return (m, depth) => mapEntry(m[name], valueIn, empty, depth);
};

const bool = (): boolean => u32() !== 0;
const bodySendMode = (): string | number => {
  const n = u32() | 0;
  return BODY_SEND_MODES[n] ?? n;
};
const nullValue = (): string | number => {
  const n = u32() | 0;
  return n === 0 ? 'NULL_VALUE' : n;
};
const emptyStruct = (): Obj => ({ fields: {} });
const emptyValue = (): Obj => ({});
const emptyAny = (): Obj => ({ type_url: '', value: EMPTY });

// google.protobuf.Struct, Value and ListValue refer to each other: the later ones are called
// through an arrow, read when a message is decoded rather than when this module loads.
const struct = message({
  empty: emptyStruct,
  fields: { 1: mapOf('fields', (depth) => value(depth), emptyValue) },
});

const value = message({
  empty: emptyValue,
  fields: {
    1: scalar('nullValue', nullValue),
    2: scalar('numberValue', double),
    3: scalar('stringValue', string),
    4: scalar('boolValue', bool),
    5: sub('structValue', struct),
    6: sub('listValue', (depth) => listValue(depth)),
  },
  oneof: { name: 'kind', members: VALUE_KINDS },
});

const listValue = message({
  empty: () => ({ values: [] }),
  fields: { 1: repeated('values', value) },
});

const headerValue = message({
  empty: () => ({ key: '', value: '', raw_value: EMPTY }),
  fields: { 1: scalar('key', string), 2: scalar('value', string), 3: scalar('raw_value', bytes) },
});

const headerMap = message({
  empty: () => ({ headers: [] }),
  fields: { 1: repeated('headers', headerValue) },
});

const httpHeaders = message({
  empty: () => ({ attributes: {}, headers: null, end_of_stream: false }),
  fields: {
    1: sub('headers', headerMap),
    2: mapOf('attributes', struct, emptyStruct),
    3: scalar('end_of_stream', bool),
  },
});

const httpBody = message({
  empty: () => ({
    body: EMPTY,
    end_of_stream: false,
    end_of_stream_without_message: false,
    grpc_message_compressed: false,
  }),
  fields: {
    1: scalar('body', bytes),
    2: scalar('end_of_stream', bool),
    3: scalar('end_of_stream_without_message', bool),
    4: scalar('grpc_message_compressed', bool),
  },
});

const httpTrailers = message({
  empty: () => ({ trailers: null }),
  fields: { 1: sub('trailers', headerMap) },
});

const any = message({
  empty: emptyAny,
  fields: { 1: scalar('type_url', string), 2: scalar('value', bytes) },
});

const metadata = message({
  empty: () => ({ filter_metadata: {}, typed_filter_metadata: {} }),
  fields: {
    1: mapOf('filter_metadata', struct, emptyStruct),
    2: mapOf('typed_filter_metadata', any, emptyAny),
  },
});

const protocolConfig = message({
  empty: () => ({
    request_body_mode: 'NONE',
    response_body_mode: 'NONE',
    send_body_without_waiting_for_header_response: false,
  }),
  fields: {
    1: scalar('request_body_mode', bodySendMode),
    2: scalar('response_body_mode', bodySendMode),
    3: scalar('send_body_without_waiting_for_header_response', bool),
  },
});

const processingRequest = message({
  empty: () => ({
    attributes: {},
    metadata_context: null,
    observability_mode: false,
    protocol_config: null,
  }),
  fields: {
    2: sub('request_headers', httpHeaders),
    3: sub('response_headers', httpHeaders),
    4: sub('request_body', httpBody),
    5: sub('response_body', httpBody),
    6: sub('request_trailers', httpTrailers),
    7: sub('response_trailers', httpTrailers),
    8: sub('metadata_context', metadata),
    9: mapOf('attributes', struct, emptyStruct),
    10: scalar('observability_mode', bool),
    11: sub('protocol_config', protocolConfig),
  },
  oneof: { name: 'request', members: REQUEST_KINDS },
});

/** One ProcessingRequest, as proto-loader's `requestDeserialize` gives it. */
export function decodeProcessingRequest(bytes: Buffer): ProcessingRequest {
  buf = bytes;
  pos = 0;
  lim = bytes.length;
  try {
    return processingRequest(0) as ProcessingRequest;
  } finally {
    // Not kept alive by the shared reader state.
    buf = EMPTY;
  }
}
