/**
 * `encodeProcessingResponse`: the picker's answers (`ProcessingResponse`, as `messages.ts` types
 * them) straight to protobuf bytes, in one buffer sized first, written once. It replaces
 * `@grpc/proto-loader`'s serializer (protobufjs `fromObject`, then `encode` through a writer of
 * linked chunks) on the ext_proc stream: per pick that was a header answer, one body chunk of
 * the whole request (tens of kB) and their copies.
 *
 * Field numbers are those of Envoy's `external_processor.proto` and `base.proto` (vendored
 * unmodified under `/proto`) and of `google/protobuf/struct.proto`. The bytes are protobufjs'
 * own for the same object (`test/epp/epp.wire.test.ts` compares them): fields in declaration order,
 * a field written whenever the object holds it (a `false` or empty value included), map entries
 * in key order of the object. Only the fields `ProcessingResponse` types are read; any other key
 * of the object is not sent.
 */
import type {
  CommonResponse,
  HeaderValueOption,
  PbStruct,
  PbValue,
  ProcessingResponse,
} from './messages.ts';

type Header = HeaderValueOption['header'] & { value?: string };
type ImmediateResponse = NonNullable<ProcessingResponse['immediate_response']>;

/** ProcessingResponse's `response` oneof: field numbers in declaration order. */
const RESPONSE_FIELDS = [
  ['request_headers', 1],
  ['response_headers', 2],
  ['request_body', 3],
  ['response_body', 4],
  ['request_trailers', 5],
  ['response_trailers', 6],
  ['immediate_response', 7],
] as const;
const DYNAMIC_METADATA = 8;

const WIRE_VARINT = 0;
const WIRE_FIXED64 = 1;
const WIRE_BYTES = 2;

/** The protobuf encoding of `response`. */
export function encodeProcessingResponse(response: ProcessingResponse): Buffer {
  const w = new Writer(sizeResponse(response));
  writeResponse(w, response);
  if (w.at !== w.buf.length) throw new Error(`ext_proc encoder: wrote ${w.at} of ${w.buf.length}`);
  return w.buf;
}

class Writer {
  readonly buf: Buffer;
  at = 0;

  constructor(size: number) {
    this.buf = Buffer.allocUnsafe(size);
  }

  varint(n: number): void {
    const buf = this.buf;
    while (n > 127) {
      buf[this.at++] = (n & 127) | 128;
      n = Math.floor(n / 128);
    }
    buf[this.at++] = n;
  }

  tag(field: number, wire: number): void {
    this.varint(field * 8 + wire);
  }

  /** A length-delimited field's head: tag and length. */
  open(field: number, length: number): void {
    this.tag(field, WIRE_BYTES);
    this.varint(length);
  }

  bytes(field: number, b: Uint8Array): void {
    this.open(field, b.length);
    this.buf.set(b, this.at);
    this.at += b.length;
  }

  string(field: number, s: string, byteLength: number): void {
    this.open(field, byteLength);
    if (byteLength === s.length && s.length <= SHORT_STRING) {
      // ASCII (one byte a character) and short: no call into the runtime.
      const buf = this.buf;
      for (let i = 0; i < s.length; i++) buf[this.at++] = s.charCodeAt(i);
    } else {
      this.at += this.buf.write(s, this.at, byteLength, 'utf8');
    }
  }

  bool(field: number, b: boolean): void {
    this.tag(field, WIRE_VARINT);
    this.buf[this.at++] = b ? 1 : 0;
  }

  double(field: number, x: number): void {
    this.tag(field, WIRE_FIXED64);
    this.at = this.buf.writeDoubleLE(x, this.at);
  }
}

/** Strings up to this long are measured and copied here, longer ones by Buffer's natives. */
const SHORT_STRING = 64;

/** Bytes of `s` in UTF-8, as Buffer.byteLength counts them (a lone surrogate: 3, U+FFFD). */
function utf8Length(s: string): number {
  if (s.length > SHORT_STRING) return Buffer.byteLength(s);
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) n += 1;
    else {
      // 3 bytes, or 4 for a surrogate pair (2 characters); a lone surrogate is U+FFFD (3).
      n += 2;
      if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
        const d = s.charCodeAt(i + 1);
        if (d >= 0xdc00 && d <= 0xdfff) i++;
      }
    }
  }
  return n;
}

function varintSize(n: number): number {
  let size = 1;
  while (n > 127) {
    n = Math.floor(n / 128);
    size++;
  }
  return size;
}

/** Tag and length of a length-delimited field of `length` bytes (field numbers below 16). */
const delimited = (length: number): number => 1 + varintSize(length) + length;
const has = <T>(x: T | null | undefined): x is T => x !== undefined && x !== null;

function sizeResponse(r: ProcessingResponse): number {
  let size = 0;
  for (const [name, field] of RESPONSE_FIELDS) {
    const part = r[name];
    if (!has(part)) continue;
    size += delimited(sizeOneof(field, part));
  }
  if (has(r.dynamic_metadata)) size += delimited(sizeStruct(r.dynamic_metadata));
  return size;
}

function writeResponse(w: Writer, r: ProcessingResponse): void {
  for (const [name, field] of RESPONSE_FIELDS) {
    const part = r[name];
    if (!has(part)) continue;
    w.open(field, sizeOneof(field, part));
    writeOneof(w, field, part);
  }
  if (has(r.dynamic_metadata)) {
    w.open(DYNAMIC_METADATA, sizeStruct(r.dynamic_metadata));
    writeStruct(w, r.dynamic_metadata);
  }
}

/** HeadersResponse / BodyResponse {response = 1}, TrailersResponse {}, ImmediateResponse. */
function sizeOneof(field: number, part: unknown): number {
  if (field === 7) return sizeImmediate(part as ImmediateResponse);
  if (field >= 5) return 0;
  const common = (part as { response?: CommonResponse | null }).response;
  return has(common) ? delimited(sizeCommon(common)) : 0;
}

function writeOneof(w: Writer, field: number, part: unknown): void {
  if (field === 7) {
    writeImmediate(w, part as ImmediateResponse);
    return;
  }
  const common = field < 5 ? (part as { response?: CommonResponse | null }).response : null;
  if (!has(common)) return;
  w.open(1, sizeCommon(common));
  writeCommon(w, common);
}

/** CommonResponse {header_mutation = 2, body_mutation = 3, clear_route_cache = 5}. */
function sizeCommon(c: CommonResponse): number {
  let size = 0;
  if (has(c.header_mutation)) size += delimited(sizeMutation(c.header_mutation));
  if (has(c.body_mutation)) size += delimited(sizeBodyMutation(c.body_mutation));
  if (has(c.clear_route_cache)) size += 2;
  return size;
}

function writeCommon(w: Writer, c: CommonResponse): void {
  if (has(c.header_mutation)) {
    w.open(2, sizeMutation(c.header_mutation));
    writeMutation(w, c.header_mutation);
  }
  if (has(c.body_mutation)) {
    w.open(3, sizeBodyMutation(c.body_mutation));
    writeBodyMutation(w, c.body_mutation);
  }
  if (has(c.clear_route_cache)) w.bool(5, c.clear_route_cache);
}

/** BodyMutation {body = 1 | streamed_response = 3 {body = 1, end_of_stream = 2}}. */
function sizeBodyMutation(m: NonNullable<CommonResponse['body_mutation']>): number {
  if ('body' in m) return delimited(m.body.length);
  const s = m.streamed_response;
  return delimited(delimited(s.body.length) + (has(s.end_of_stream) ? 2 : 0));
}

function writeBodyMutation(w: Writer, m: NonNullable<CommonResponse['body_mutation']>): void {
  if ('body' in m) {
    w.bytes(1, m.body);
    return;
  }
  const s = m.streamed_response;
  w.open(3, delimited(s.body.length) + (has(s.end_of_stream) ? 2 : 0));
  w.bytes(1, s.body);
  if (has(s.end_of_stream)) w.bool(2, s.end_of_stream);
}

interface Mutation {
  set_headers?: readonly HeaderValueOption[] | null;
  remove_headers?: readonly string[] | null;
}

/**
 * HeaderMutation {set_headers = 1: repeated HeaderValueOption {header = 1},
 * remove_headers = 2: repeated string}.
 */
function sizeMutation(m: Mutation): number {
  let size = 0;
  for (const h of m.set_headers ?? []) size += delimited(delimited(sizeHeader(h.header)));
  for (const name of m.remove_headers ?? []) size += delimited(utf8Length(name));
  return size;
}

function writeMutation(w: Writer, m: Mutation): void {
  for (const h of m.set_headers ?? []) {
    const size = sizeHeader(h.header);
    w.open(1, delimited(size));
    w.open(1, size);
    writeHeader(w, h.header);
  }
  for (const name of m.remove_headers ?? []) w.string(2, name, utf8Length(name));
}

/** HeaderValue {key = 1, value = 2, raw_value = 3}. */
function sizeHeader(h: Header): number {
  let size = delimited(utf8Length(h.key));
  if (has(h.value)) size += delimited(utf8Length(h.value));
  if (has(h.raw_value)) size += delimited(h.raw_value.length);
  return size;
}

function writeHeader(w: Writer, h: Header): void {
  w.string(1, h.key, utf8Length(h.key));
  if (has(h.value)) w.string(2, h.value, utf8Length(h.value));
  if (has(h.raw_value)) w.bytes(3, h.raw_value);
}

/**
 * ImmediateResponse {status = 1: HttpStatus {code = 1}, headers = 2: HeaderMutation,
 * body = 3, details = 5}.
 */
function sizeImmediate(r: ImmediateResponse): number {
  let size = 0;
  if (has(r.status)) size += delimited(has(r.status.code) ? 1 + varintSize(r.status.code) : 0);
  if (has(r.headers)) size += delimited(sizeMutation(r.headers));
  if (has(r.body)) size += delimited(r.body.length);
  if (has(r.details)) size += delimited(utf8Length(r.details));
  return size;
}

function writeImmediate(w: Writer, r: ImmediateResponse): void {
  if (has(r.status)) {
    const code = r.status.code;
    w.open(1, has(code) ? 1 + varintSize(code) : 0);
    if (has(code)) {
      w.tag(1, WIRE_VARINT);
      w.varint(code);
    }
  }
  if (has(r.headers)) {
    w.open(2, sizeMutation(r.headers));
    writeMutation(w, r.headers);
  }
  if (has(r.body)) w.bytes(3, r.body);
  if (has(r.details)) w.string(5, r.details, utf8Length(r.details));
}

/** Struct {fields = 1: map<string, Value>}: each entry {key = 1, value = 2}. */
function sizeStruct(s: PbStruct): number {
  let size = 0;
  const fields = s.fields;
  if (!has(fields)) return 0;
  for (const key of Object.keys(fields)) {
    size += delimited(delimited(utf8Length(key)) + delimited(sizeValue(fields[key]!)));
  }
  return size;
}

function writeStruct(w: Writer, s: PbStruct): void {
  const fields = s.fields;
  if (!has(fields)) return;
  for (const key of Object.keys(fields)) {
    const keyBytes = utf8Length(key);
    const valueSize = sizeValue(fields[key]!);
    w.open(1, delimited(keyBytes) + delimited(valueSize));
    w.string(1, key, keyBytes);
    w.open(2, valueSize);
    writeValue(w, fields[key]!);
  }
}

/** Value {number_value = 2, string_value = 3, bool_value = 4, struct_value = 5, list_value = 6}. */
function sizeValue(v: PbValue): number {
  let size = 0;
  if (has(v.numberValue)) size += 9;
  if (has(v.stringValue)) size += delimited(utf8Length(v.stringValue));
  if (has(v.boolValue)) size += 2;
  if (has(v.structValue)) size += delimited(sizeStruct(v.structValue));
  if (has(v.listValue)) size += delimited(sizeList(v.listValue.values));
  return size;
}

function writeValue(w: Writer, v: PbValue): void {
  if (has(v.numberValue)) w.double(2, v.numberValue);
  if (has(v.stringValue)) w.string(3, v.stringValue, utf8Length(v.stringValue));
  if (has(v.boolValue)) w.bool(4, v.boolValue);
  if (has(v.structValue)) {
    w.open(5, sizeStruct(v.structValue));
    writeStruct(w, v.structValue);
  }
  if (has(v.listValue)) {
    w.open(6, sizeList(v.listValue.values));
    writeList(w, v.listValue.values);
  }
}

/** ListValue {values = 1: repeated Value}. */
function sizeList(values: readonly PbValue[] | null | undefined): number {
  let size = 0;
  for (const v of values ?? []) size += delimited(sizeValue(v));
  return size;
}

function writeList(w: Writer, values: readonly PbValue[] | null | undefined): void {
  for (const v of values ?? []) {
    w.open(1, sizeValue(v));
    writeValue(w, v);
  }
}
