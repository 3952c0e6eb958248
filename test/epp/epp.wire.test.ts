/**
 * The picker's own ext_proc response encoder (`src/epp/wire.ts`) against protobufjs encoding the
 * vendored upstream protos (`proto/`, Envoy's `external_processor.proto` and `base.proto`):
 * byte for byte equal on every answer the exchange builds (header mutation and `envoy.lb`
 * metadata, body chunks, BUFFERED's body mutation, trailers, immediate responses) and, by
 * property, on any response of the typed shape; one header answer is also checked against bytes
 * written by hand from the field numbers, and every encoding decodes back to its object. A lone
 * surrogate is written as U+FFFD, as Buffer writes it (protobufjs writes a string under 40
 * characters with its own encoder, which gives the surrogate's invalid 3-byte form, one that
 * Envoy's parser would refuse in a `string` field).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import {
  destinationMetadata,
  headerOption,
  immediateResponse,
  type PbStruct,
  type PbValue,
  type ProcessingResponse,
  streamedBody,
} from '../../src/epp/messages.ts';
import { EXT_PROC_SERVICE, eppPackage } from '../../src/epp/protos.ts';
import { encodeProcessingResponse } from '../../src/epp/wire.ts';
import { ApiError } from '../../src/openai/errors.ts';

const method = (
  eppPackage()[EXT_PROC_SERVICE] as unknown as {
    Process: {
      responseSerialize(v: unknown): Buffer;
      responseDeserialize(b: Buffer): Record<string, unknown>;
    };
  }
).Process;

const equalToProtobufjs = (response: ProcessingResponse) => {
  const ours = encodeProcessingResponse(response);
  assert.equal(ours.toString('hex'), method.responseSerialize(response).toString('hex'));
  return ours;
};

test("the exchange's answers encode as protobufjs encodes them", () => {
  const endpoint = '10.0.0.7:8000';
  const headers = [
    headerOption('x-gateway-destination-endpoint', endpoint),
    headerOption('content-length', '40210'),
    headerOption('x-request-id', 'f1c1e4a4-1b7e-4d7c-9a55-6a3f3d3f0a11'),
  ];
  const answers: ProcessingResponse[] = [
    {
      request_headers: {
        response: { clear_route_cache: true, header_mutation: { set_headers: headers } },
      },
      dynamic_metadata: destinationMetadata(endpoint),
    },
    { request_headers: { response: {} } },
    {
      request_body: {
        response: {
          header_mutation: { set_headers: headers },
          body_mutation: { body: Buffer.from('{"model":"m","cache_salt":"é"}') },
          clear_route_cache: true,
        },
      },
      dynamic_metadata: destinationMetadata(endpoint),
    },
    {
      response_headers: {
        response: { header_mutation: { set_headers: [headerOption('x-kvroute-replica', 'r0')] } },
      },
    },
    { response_body: { response: {} } },
    { request_trailers: {} },
    { response_trailers: {} },
    immediateResponse(new ApiError('ERR_BAD_JSON', 'request body is not valid JSON: ©')),
    immediateResponse(new ApiError('ERR_NO_HEALTHY_BACKEND', 'no endpoint')),
    ...streamedBody('request_body', Buffer.alloc(130_000, 0x61), true),
    ...streamedBody('response_body', Buffer.alloc(0), false),
    ...streamedBody('response_body', Buffer.from('data: {"x":1}\n\n'), true),
  ];
  for (const a of answers) {
    const bytes = equalToProtobufjs(a);
    assert.deepEqual(
      method.responseDeserialize(bytes),
      method.responseDeserialize(method.responseSerialize(a)),
    );
  }
});

test('a header answer is the bytes the field numbers give', () => {
  const lenField = (n: number, b: Buffer) =>
    Buffer.concat([Buffer.from([(n << 3) | 2, b.length]), b]);
  // HeaderValue{key = 1, raw_value = 3} in HeaderValueOption{header = 1} in
  // HeaderMutation{set_headers = 1} in CommonResponse{header_mutation = 2, clear_route_cache = 5}
  // in HeadersResponse{response = 1} in ProcessingResponse{request_headers = 1}.
  const value = Buffer.concat([lenField(1, Buffer.from('k')), lenField(3, Buffer.from('v'))]);
  const common = Buffer.concat([
    lenField(2, lenField(1, lenField(1, value))),
    Buffer.from([5 << 3, 1]),
  ]);
  const expected = lenField(1, lenField(1, common));
  const bytes = encodeProcessingResponse({
    request_headers: {
      response: {
        header_mutation: { set_headers: [headerOption('k', 'v')] },
        clear_route_cache: true,
      },
    },
  });
  assert.equal(bytes.toString('hex'), expected.toString('hex'));
});

/** Strings of any code points (a lone surrogate: the test below). */
const text = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 90 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
);
const bytesArb = fc
  .oneof(
    fc.uint8Array({ maxLength: 40 }),
    fc.integer({ min: 0, max: 70_000 }).map((n) => new Uint8Array(n).fill(0x7b)),
  )
  .map((u) => Buffer.from(u));
const header = fc.record(
  { key: text, value: text, raw_value: bytesArb },
  { requiredKeys: ['key'] },
);
const headerOptions = fc.array(
  header.map((h) => ({ header: h })),
  { maxLength: 4 },
) as fc.Arbitrary<ReturnType<typeof headerOption>[]>;
const { struct } = fc.letrec<{ struct: PbStruct; value: PbValue }>((tie) => ({
  struct: fc.record({ fields: fc.dictionary(text, tie('value'), { maxKeys: 3 }) }),
  value: fc.oneof(
    { depthSize: 'small' },
    fc.record({ stringValue: text }),
    fc.record({ numberValue: fc.double() }),
    fc.record({ boolValue: fc.boolean() }),
    fc.record({ structValue: tie('struct') as fc.Arbitrary<PbStruct> }),
    fc.record({ listValue: fc.record({ values: fc.array(tie('value'), { maxLength: 3 }) }) }),
  ) as fc.Arbitrary<PbValue>,
}));
const common = fc.record(
  {
    header_mutation: fc.record(
      { set_headers: headerOptions, remove_headers: fc.array(text, { maxLength: 3 }) },
      { requiredKeys: ['set_headers'] },
    ),
    body_mutation: fc.oneof(
      fc.record({ body: bytesArb }),
      fc.record({
        streamed_response: fc.record({ body: bytesArb, end_of_stream: fc.boolean() }),
      }),
    ),
    clear_route_cache: fc.boolean(),
  },
  { requiredKeys: [] },
);
const oneof = fc.oneof(
  fc.record({ request_headers: fc.record({ response: common }) }),
  fc.record({ response_headers: fc.record({ response: common }) }),
  fc.record({ request_body: fc.record({ response: common }) }),
  fc.record({ response_body: fc.record({ response: common }) }),
  fc.constant({ request_trailers: {} }),
  fc.constant({ response_trailers: {} }),
  fc.record({
    immediate_response: fc.record({
      status: fc.record({ code: fc.integer({ min: 100, max: 599 }) }),
      headers: fc.record({ set_headers: headerOptions }),
      body: bytesArb,
      details: text,
    }),
  }),
);
const response = fc
  .tuple(oneof, fc.option(struct, { nil: undefined }))
  .map(([r, metadata]) => ({ ...r, ...(metadata && { dynamic_metadata: metadata }) }));

test('property: any response of the typed shape encodes as protobufjs encodes it', () => {
  fc.assert(
    fc.property(response, (r) => {
      equalToProtobufjs(r as ProcessingResponse);
    }),
    { numRuns: 3000 },
  );
});

test('a lone surrogate in a string is U+FFFD, short or long', () => {
  for (const details of ['a\ud800b', '\udc00', `${'x'.repeat(50)}\ud800`, '\ud83d\ude00']) {
    const bytes = encodeProcessingResponse({
      immediate_response: { details } as never,
    });
    const utf8 = Buffer.from(details, 'utf8');
    // ProcessingResponse.immediate_response = 7 {details = 5}.
    const expected = Buffer.concat([Buffer.from([0x3a, utf8.length + 2, 0x2a, utf8.length]), utf8]);
    assert.equal(bytes.toString('hex'), expected.toString('hex'));
  }
});
