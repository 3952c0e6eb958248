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

function struct(depth: number): Obj {
  const fields: Obj = {};
  while (pos < lim) {
    const t = u32();
    if (t >>> 3 === 1) mapEntry(fields, valueIn, emptyValue, depth);
    else skip(t & 7, depth);
  }
  return { fields };
}
const structIn = (depth: number): Obj => nested(struct, depth);
const emptyValue = (): Obj => ({});

function value(depth: number): Obj {
  const v: Obj = {};
  let kind = 0;
  while (pos < lim) {
    const t = u32();
    const field = t >>> 3;
    switch (field) {
      case 1: {
        const n = u32() | 0;
        v.nullValue = n === 0 ? 'NULL_VALUE' : n;
        break;
      }
      case 2:
        v.numberValue = double();
        break;
      case 3:
        v.stringValue = string();
        break;
      case 4:
        v.boolValue = u32() !== 0;
        break;
      case 5:
        v.structValue = structIn(depth + 1);
        break;
      case 6:
        v.listValue = nested(listValue, depth + 1);
        break;
      default:
        skip(t & 7, depth);
        continue;
    }
    if (field > kind) kind = field;
  }
  // protobufjs' toObject names the last declared member present.
  if (kind > 0) v.kind = VALUE_KINDS[kind];
  return v;
}
const valueIn = (depth: number): Obj => nested(value, depth);

function listValue(depth: number): Obj {
  const values: Obj[] = [];
  while (pos < lim) {
    const t = u32();
    if (t >>> 3 === 1) values.push(valueIn(depth + 1));
    else skip(t & 7, depth);
  }
  return { values };
}

function headerMap(depth: number): Obj {
  const headers: Obj[] = [];
  while (pos < lim) {
    const t = u32();
    if (t >>> 3 === 1) headers.push(nested(headerValue, depth + 1));
    else skip(t & 7, depth);
  }
  return { headers };
}

function headerValue(depth: number): Obj {
  const h: Obj = { key: '', value: '', raw_value: EMPTY };
  while (pos < lim) {
    const t = u32();
    switch (t >>> 3) {
      case 1:
        h.key = string();
        break;
      case 2:
        h.value = string();
        break;
      case 3:
        h.raw_value = bytes();
        break;
      default:
        skip(t & 7, depth);
    }
  }
  return h;
}

function httpHeaders(depth: number): Obj {
  const h: Obj = { attributes: {}, headers: null, end_of_stream: false };
  while (pos < lim) {
    const t = u32();
    switch (t >>> 3) {
      case 1:
        h.headers = nested(headerMap, depth + 1);
        break;
      case 2:
        mapEntry(h.attributes, structIn, emptyStruct, depth);
        break;
      case 3:
        h.end_of_stream = u32() !== 0;
        break;
      default:
        skip(t & 7, depth);
    }
  }
  return h;
}
const emptyStruct = (): Obj => ({ fields: {} });

function httpBody(depth: number): Obj {
  const b: Obj = {
    body: EMPTY,
    end_of_stream: false,
    end_of_stream_without_message: false,
    grpc_message_compressed: false,
  };
  while (pos < lim) {
    const t = u32();
    switch (t >>> 3) {
      case 1:
        b.body = bytes();
        break;
      case 2:
        b.end_of_stream = u32() !== 0;
        break;
      case 3:
        b.end_of_stream_without_message = u32() !== 0;
        break;
      case 4:
        b.grpc_message_compressed = u32() !== 0;
        break;
      default:
        skip(t & 7, depth);
    }
  }
  return b;
}

function httpTrailers(depth: number): Obj {
  const tr: Obj = { trailers: null };
  while (pos < lim) {
    const t = u32();
    if (t >>> 3 === 1) tr.trailers = nested(headerMap, depth + 1);
    else skip(t & 7, depth);
  }
  return tr;
}

function any(depth: number): Obj {
  const a: Obj = { type_url: '', value: EMPTY };
  while (pos < lim) {
    const t = u32();
    const field = t >>> 3;
    if (field === 1) a.type_url = string();
    else if (field === 2) a.value = bytes();
    else skip(t & 7, depth);
  }
  return a;
}
const anyIn = (depth: number): Obj => nested(any, depth);
const emptyAny = (): Obj => ({ type_url: '', value: EMPTY });

function metadata(depth: number): Obj {
  const m: Obj = { filter_metadata: {}, typed_filter_metadata: {} };
  while (pos < lim) {
    const t = u32();
    switch (t >>> 3) {
      case 1:
        mapEntry(m.filter_metadata, structIn, emptyStruct, depth);
        break;
      case 2:
        mapEntry(m.typed_filter_metadata, anyIn, emptyAny, depth);
        break;
      default:
        skip(t & 7, depth);
    }
  }
  return m;
}

const bodySendMode = (): string | number => {
  const n = u32() | 0;
  return BODY_SEND_MODES[n] ?? n;
};

function protocolConfig(depth: number): Obj {
  const c: Obj = {
    request_body_mode: 'NONE',
    response_body_mode: 'NONE',
    send_body_without_waiting_for_header_response: false,
  };
  while (pos < lim) {
    const t = u32();
    switch (t >>> 3) {
      case 1:
        c.request_body_mode = bodySendMode();
        break;
      case 2:
        c.response_body_mode = bodySendMode();
        break;
      case 3:
        c.send_body_without_waiting_for_header_response = u32() !== 0;
        break;
      default:
        skip(t & 7, depth);
    }
  }
  return c;
}

function processingRequest(): Obj {
  const r: Obj = {
    attributes: {},
    metadata_context: null,
    observability_mode: false,
    protocol_config: null,
  };
  let kind = 0;
  while (pos < lim) {
    const t = u32();
    const field = t >>> 3;
    switch (field) {
      case 2:
      case 3:
        r[REQUEST_KINDS[field]] = nested(httpHeaders, 1);
        if (field > kind) kind = field;
        break;
      case 4:
      case 5:
        r[REQUEST_KINDS[field]] = nested(httpBody, 1);
        if (field > kind) kind = field;
        break;
      case 6:
      case 7:
        r[REQUEST_KINDS[field]] = nested(httpTrailers, 1);
        if (field > kind) kind = field;
        break;
      case 8:
        r.metadata_context = nested(metadata, 1);
        break;
      case 9:
        mapEntry(r.attributes, structIn, emptyStruct, 0);
        break;
      case 10:
        r.observability_mode = u32() !== 0;
        break;
      case 11:
        r.protocol_config = nested(protocolConfig, 1);
        break;
      default:
        skip(t & 7, 0);
    }
  }
  // protobufjs' toObject names the last declared member present.
  if (kind > 0) r.request = REQUEST_KINDS[kind];
  return r;
}

/** One ProcessingRequest, as proto-loader's `requestDeserialize` gives it. */
export function decodeProcessingRequest(bytes: Buffer): ProcessingRequest {
  buf = bytes;
  pos = 0;
  lim = bytes.length;
  try {
    return processingRequest() as ProcessingRequest;
  } finally {
    // Not kept alive by the shared reader state.
    buf = EMPTY;
  }
}
