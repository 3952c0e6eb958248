/**
 * The picker's own ProcessingRequest decoder (`src/epp/wireIn.ts`) against protobufjs on the
 * vendored upstream protos (proto-loader's `requestDeserialize`, the picker's decoder before).
 * The messages are built field by field from the protos' field numbers and wire types, with
 * unknown fields (numbers the protos do not declare, every wire type protobufjs skips) mixed in
 * at every level, fields repeated, several oneof members set, invalid UTF-8 in strings; the
 * expected object is protobufjs' whole decoded object (every field it fills in, defaults
 * included), compared with deepStrictEqual, so a field the decoder misnames, adds or leaves out
 * fails.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  httpHeaders,
  requestHeaders,
  servedMetadata,
  subsetMetadata,
} from '../../src/epp/dataPlane.ts';
import { EXT_PROC_SERVICE, serviceDefinition } from '../../src/epp/protos.ts';
import { decodeProcessingRequest } from '../../src/epp/wireIn.ts';

const process = serviceDefinition(EXT_PROC_SERVICE).Process!;
const protobufjs = (bytes: Buffer): unknown => process.requestDeserialize(bytes);
const serialize = (message: Record<string, unknown>): Buffer => process.requestSerialize(message);

// Protobuf wire encoding, for building inputs only (the expected side is protobufjs' decoding).
function varint(n: bigint): Buffer {
  const out: number[] = [];
  let v = n;
  do {
    const low = Number(v & 0x7fn);
    v >>= 7n;
    out.push(v > 0n ? low | 0x80 : low);
  } while (v > 0n);
  return Buffer.from(out);
}
const tag = (field: number, wireType: number) => varint((BigInt(field) << 3n) | BigInt(wireType));
const delimited = (field: number, payload: Buffer) =>
  Buffer.concat([tag(field, 2), varint(BigInt(payload.length)), payload]);
const varintField = (field: number, value: bigint) => Buffer.concat([tag(field, 0), varint(value)]);

const u32 = fc.oneof(fc.constantFrom(0, 1, 2, 127, 128), fc.nat({ max: 0xffffffff }));
const bool = (field: number) => u32.map((v) => varintField(field, BigInt(v)));
/** Text as UTF-8, or any bytes (protobufjs and the decoder both read them as Buffer's UTF-8). */
const text = fc.oneof(
  { weight: 3, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }).map((s) => Buffer.from(s)) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 48 }).map((b) => Buffer.from(b)) },
);
/** A map key: never `__proto__` (protobufjs' toObject assigns it as a prototype). */
const key = text.filter((b) => b.toString('utf8') !== '__proto__');
const stringField = (field: number) => text.map((b) => delimited(field, b));
const bytesField = (field: number) =>
  fc.uint8Array({ maxLength: 40 }).map((b) => delimited(field, Buffer.from(b)));

/** A field number none of the decoded messages declares, with a payload of any skipped type. */
const unknownField = fc.oneof(
  fc
    .tuple(fc.integer({ min: 12, max: 2000 }), fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }))
    .map(([f, v]) => varintField(f, v)),
  fc
    .tuple(fc.integer({ min: 12, max: 2000 }), fc.uint8Array({ minLength: 8, maxLength: 8 }))
    .map(([f, b]) => Buffer.concat([tag(f, 1), Buffer.from(b)])),
  fc
    .tuple(fc.integer({ min: 12, max: 2000 }), fc.uint8Array({ maxLength: 20 }))
    .map(([f, b]) => delimited(f, Buffer.from(b))),
  fc
    .tuple(fc.integer({ min: 12, max: 2000 }), fc.uint8Array({ minLength: 4, maxLength: 4 }))
    .map(([f, b]) => Buffer.concat([tag(f, 5), Buffer.from(b)])),
  fc
    .tuple(fc.integer({ min: 12, max: 2000 }), fc.nat())
    .map(([f, v]) => Buffer.concat([tag(f, 3), varintField(1, BigInt(v)), tag(f, 4)])),
  fc.constant(varintField(536_870_911, 7n)),
);

/** A message's fields: any of `known` (any number of times, any order) and unknown fields. */
function fields(known: fc.Arbitrary<Buffer>[], maxLength = 5): fc.Arbitrary<Buffer> {
  const one = known.length === 0 ? unknownField : fc.oneof(...known, unknownField);
  return fc.array(one, { maxLength }).map((parts) => Buffer.concat(parts));
}

/** A map entry: the key (or none: ''), the value, unknown fields anywhere. */
function mapEntry(field: number, value: fc.Arbitrary<Buffer>): fc.Arbitrary<Buffer> {
  return fc
    .tuple(fc.option(key), value, fc.array(unknownField, { maxLength: 2 }), fc.boolean())
    .map(([k, v, unknown, keyFirst]) => {
      const keyPart = k === null ? Buffer.alloc(0) : delimited(1, k);
      const valuePart = delimited(2, v);
      const parts = keyFirst ? [keyPart, ...unknown, valuePart] : [valuePart, ...unknown, keyPart];
      return delimited(field, Buffer.concat(parts));
    });
}

const { struct } = fc.letrec<{ struct: Buffer; value: Buffer; list: Buffer }>((tie) => ({
  struct: fields([mapEntry(1, tie('value'))], 3),
  value: fields(
    [
      u32.map((v) => varintField(1, BigInt(v % 3))),
      fc.double().map((d) => {
        const b = Buffer.alloc(8);
        b.writeDoubleLE(d);
        return Buffer.concat([tag(2, 1), b]);
      }),
      stringField(3),
      bool(4),
      tie('struct').map((s) => delimited(5, s)),
      tie('list').map((l) => delimited(6, l)),
    ],
    2,
  ),
  list: fields([tie('value').map((v) => delimited(1, v))], 3),
}));

const headerValue = fields([stringField(1), stringField(2), bytesField(3)], 4);
const headerMap = fields([headerValue.map((h) => delimited(1, h))], 4);
const httpHeaders_ = fields([headerMap.map((m) => delimited(1, m)), mapEntry(2, struct), bool(3)]);
const httpBody = fields([bytesField(1), bool(2), bool(3), bool(4)]);
const httpTrailers = fields([headerMap.map((m) => delimited(1, m))]);
const any = fields([stringField(1), bytesField(2)], 3);
const metadata = fields([mapEntry(1, struct), mapEntry(2, any)], 4);
const mode = (field: number) =>
  fc.oneof(fc.integer({ min: 0, max: 7 }), u32).map((v) => varintField(field, BigInt(v)));
const protocolConfig = fields([mode(1), mode(2), bool(3)], 4);
const processingRequest = fields(
  [
    httpHeaders_.map((h) => delimited(2, h)),
    httpHeaders_.map((h) => delimited(3, h)),
    httpBody.map((b) => delimited(4, b)),
    httpBody.map((b) => delimited(5, b)),
    httpTrailers.map((t) => delimited(6, t)),
    httpTrailers.map((t) => delimited(7, t)),
    metadata.map((m) => delimited(8, m)),
    mapEntry(9, struct),
    bool(10),
    protocolConfig.map((c) => delimited(11, c)),
  ],
  6,
);

describe('the ProcessingRequest decoder', () => {
  test("the data plane's own messages decode as protobufjs decodes them", () => {
    const messages = [
      requestHeaders('/v1/chat/completions'),
      requestHeaders('/v1/models', { endOfStream: true, headers: { 'x-kvroute-tenant': 'acme' } }),
      requestHeaders('/v1/completions', {
        mode: 'BUFFERED',
        responseMode: 'NONE',
        metadata: subsetMetadata(['10.0.0.1:8000', '10.0.0.2']),
      }),
      { request_body: { body: Buffer.from('{"model":"m","prompt":"hi ©"}'), end_of_stream: true } },
      { request_body: { body: Buffer.alloc(0) } },
      { request_trailers: {} },
      {
        response_headers: httpHeaders({ ':status': '200', 'content-type': 'text/event-stream' }),
        metadata_context: { filter_metadata: servedMetadata('10.0.0.1:8000') },
      },
      { response_body: { body: Buffer.from('data: {"choices":[]}\n\n'), end_of_stream: false } },
      { response_trailers: { trailers: { headers: [{ key: 'grpc-status', value: '0' }] } } },
      {},
    ];
    for (const m of messages) {
      const bytes = serialize(m);
      assert.deepStrictEqual(decodeProcessingRequest(bytes), protobufjs(bytes));
    }
  });

  test('equal to protobufjs on messages with unknown fields at every level (property)', () => {
    let withKind = 0;
    fc.assert(
      fc.property(processingRequest, (bytes) => {
        const expected = protobufjs(bytes) as { request?: string };
        if (expected.request !== undefined) withKind++;
        assert.deepStrictEqual(decodeProcessingRequest(bytes), expected);
      }),
      { numRuns: 3_000 },
    );
    // The generator reaches the messages kvroute reads (not only unknown fields).
    assert.ok(withKind > 1_000, `${withKind} of 3,000 had a request set`);
  });

  test('a message protobufjs decodes after a byte is changed or cut is decoded equal (property)', () => {
    fc.assert(
      fc.property(
        processingRequest,
        fc.nat(),
        fc.nat({ max: 255 }),
        fc.boolean(),
        (bytes, at, b, cut) => {
          if (bytes.length === 0) return;
          const i = at % bytes.length;
          const changed = cut ? bytes.subarray(0, i) : Buffer.from(bytes);
          if (!cut) changed[i] = b;
          let expected: unknown;
          try {
            expected = protobufjs(changed);
          } catch {
            // protobufjs refuses it: the decoder may refuse it too, or read a default there.
            return;
          }
          assert.deepStrictEqual(decodeProcessingRequest(changed), expected);
        },
      ),
      { numRuns: 3_000 },
    );
  });

  test('truncated input throws, as protobufjs does', () => {
    const bytes = serialize({ request_body: { body: Buffer.from('hello'), end_of_stream: true } });
    for (let n = 1; n < bytes.length; n++) {
      const cut = bytes.subarray(0, n);
      assert.throws(() => protobufjs(cut), { name: 'RangeError', message: /^index out of range/ });
      assert.throws(() => decodeProcessingRequest(cut), RangeError);
    }
  });
});
