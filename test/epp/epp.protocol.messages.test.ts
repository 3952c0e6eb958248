/**
 * The endpoint picker's protocol pieces against the upstream definitions: the `envoy.lb`
 * dynamic metadata and the subset hint as protobuf bytes built by hand from the field numbers
 * of `google/protobuf/struct.proto`, `envoy/config/core/v3/base.proto` and
 * `external_processor.proto` (protobufjs drops snake_case Struct fields without a word), the
 * body chunking, endpoint names, and the gRPC health service on both ports. The CLI's flags:
 * epp.protocol.flags.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { credentials } from '@grpc/grpc-js';
import { checkHealth } from '../../src/epp/dataPlane.ts';
import { EndpointBook, joinHostPort, splitEndpoint } from '../../src/epp/endpoints.ts';
import { EppHealth, HEALTH_SERVICES } from '../../src/epp/health.ts';
import {
  BODY_CHUNK_BYTES,
  destinationMetadata,
  servedEndpoint,
  streamedBody,
  subsetHint,
} from '../../src/epp/messages.ts';
import { EXT_PROC_SERVICE, eppClients, eppPackage } from '../../src/epp/protos.ts';
import { type EppFleetHandle, startTestEpp } from '../support/epp.ts';

/** Protobuf wire format: a varint, and a length-delimited field. */
function varint(n: number): Buffer {
  const out: number[] = [];
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return Buffer.from(out);
}
const field = (n: number, bytes: Buffer | string): Buffer => {
  const b = Buffer.from(bytes);
  return Buffer.concat([varint((n << 3) | 2), varint(b.length), b]);
};
/** Struct{fields: {key: value}}: map entry field 1, entry key 1, entry value 2. */
const struct = (key: string, value: Buffer): Buffer =>
  field(1, Buffer.concat([field(1, key), field(2, value)]));
/** Value.string_value = 3, struct_value = 5, list_value = 6; ListValue.values = 1. */
const stringValue = (s: string) => field(3, s);
const structValue = (s: Buffer) => field(5, s);
const listValue = (values: Buffer[]) => field(6, Buffer.concat(values.map((v) => field(1, v))));

const method = () =>
  (
    eppPackage()[EXT_PROC_SERVICE] as unknown as {
      Process: {
        responseSerialize(v: unknown): Buffer;
        requestDeserialize(b: Buffer): never;
      };
    }
  ).Process;

describe('ext_proc messages as bytes', () => {
  test("the destination's dynamic metadata is the Struct the protocol names, on the wire", () => {
    const bytes = method().responseSerialize({
      request_headers: { response: { clear_route_cache: true } },
      dynamic_metadata: destinationMetadata('10.0.0.7:8000'),
    });
    // ProcessingResponse.dynamic_metadata = 8: {"envoy.lb": {"x-gateway-destination-endpoint": "10.0.0.7:8000"}}
    const expected = field(
      8,
      struct(
        'envoy.lb',
        structValue(struct('x-gateway-destination-endpoint', stringValue('10.0.0.7:8000'))),
      ),
    );
    assert.ok(bytes.includes(expected), bytes.toString('hex'));
  });

  test('the subset hint and the served endpoint are read from upstream bytes', () => {
    // ProcessingRequest.metadata_context = 8; Metadata.filter_metadata = 1 (map<string, Struct>).
    const filterMetadata = (ns: string, s: Buffer) =>
      field(1, Buffer.concat([field(1, ns), field(2, s)]));
    const hint = filterMetadata(
      'envoy.lb.subset_hint',
      struct(
        'x-gateway-destination-endpoint-subset',
        listValue([
          stringValue('10.0.0.1:8000'),
          Buffer.concat([Buffer.from([0x11]), Buffer.alloc(8)]),
          stringValue('[fd00::2]:8000'),
        ]),
      ),
    );
    const served = filterMetadata(
      'envoy.lb',
      struct('x-gateway-destination-endpoint-served', stringValue('10.0.0.1:8000')),
    );
    const req = method().requestDeserialize(field(8, Buffer.concat([hint, served])));
    // The number_value entry (Value field 2, a double) is not a string: ignored, as the reference does.
    assert.deepEqual(subsetHint(req), ['10.0.0.1:8000', '[fd00::2]:8000']);
    assert.equal(servedEndpoint(req), '10.0.0.1:8000');
    const none = method().requestDeserialize(field(8, served));
    assert.equal(subsetHint(none), null, 'no hint: every endpoint of the pool');
  });

  test('bodies go back in chunks of at most 62,000 bytes, end_of_stream on the last', () => {
    const body = Buffer.alloc(2 * BODY_CHUNK_BYTES + 5, 1);
    const chunks = streamedBody('request_body', body, true).map(
      (r) =>
        (
          r.request_body as {
            response: {
              body_mutation: { streamed_response: { body: Buffer; end_of_stream: boolean } };
            };
          }
        ).response.body_mutation.streamed_response,
    );
    assert.deepEqual(
      chunks.map((c) => [c.body.length, c.end_of_stream]),
      [
        [BODY_CHUNK_BYTES, false],
        [BODY_CHUNK_BYTES, false],
        [5, true],
      ],
    );
    const empty = streamedBody('response_body', Buffer.alloc(0), true);
    assert.equal(empty.length, 1, 'an empty body is one empty chunk');
    const trailersFollow = streamedBody('request_body', Buffer.from('x'), false);
    assert.equal(
      (
        trailersFollow[0]!.request_body as {
          response: { body_mutation: { streamed_response: { end_of_stream: boolean } } };
        }
      ).response.body_mutation.streamed_response.end_of_stream,
      false,
    );
  });
});

describe('endpoint names', () => {
  test('ip:port as net.JoinHostPort writes it, and subset entries split back', () => {
    assert.equal(joinHostPort('10.1.2.3', 8000), '10.1.2.3:8000');
    assert.equal(joinHostPort('fd00::1', 8000), '[fd00::1]:8000');
    assert.deepEqual(splitEndpoint('10.1.2.3:8000'), { ip: '10.1.2.3', port: '8000' });
    assert.deepEqual(splitEndpoint('[fd00::1]:8000'), { ip: 'fd00::1', port: '8000' });
    assert.deepEqual(splitEndpoint('fd00::1'), { ip: 'fd00::1', port: null });
    assert.deepEqual(splitEndpoint('10.1.2.3'), { ip: '10.1.2.3', port: null });
  });

  test('a backend URL gives its endpoint; a host name is looked up', async () => {
    const book = new EndpointBook();
    assert.equal(book.get('http://10.0.0.5:8000'), '10.0.0.5:8000');
    assert.equal(book.get('http://[fd00::5]'), '[fd00::5]:80');
    assert.equal(book.get('https://10.0.0.5'), '10.0.0.5:443');
    const local = await book.resolve('http://localhost:8001');
    assert.match(local ?? '', /^(127\.0\.0\.1|\[::1\]):8001$/);
    assert.equal(await book.resolve('http://no-such-host.invalid:8001'), null);
  });
});

describe('gRPC health', () => {
  test('liveness always; readiness and ext_proc once a pool can pick; all off when closing', () => {
    let ready = false;
    const health = new EppHealth(() => ready);
    assert.equal(health.status('liveness'), 'SERVING');
    assert.equal(health.status('readiness'), 'NOT_SERVING');
    assert.equal(health.status(EXT_PROC_SERVICE), 'NOT_SERVING');
    ready = true;
    for (const s of HEALTH_SERVICES) assert.equal(health.status(s), 'SERVING', s);
    assert.equal(health.status('nope'), 'SERVICE_UNKNOWN');
    health.close();
    assert.equal(health.status('liveness'), 'NOT_SERVING');
  });

  describe('served on the ext_proc port and on the health port', () => {
    let epp: EppFleetHandle;
    before(async () => {
      epp = await startTestEpp(1);
    });
    after(() => epp?.close());

    test('Check answers every service name; an unknown one is NOT_FOUND', async () => {
      for (const port of [epp.port, epp.healthPort!]) {
        const address = `127.0.0.1:${port}`;
        for (const s of HEALTH_SERVICES) {
          assert.deepEqual(await checkHealth(address, s), { status: 'SERVING' }, s);
        }
        assert.deepEqual(await checkHealth(address, 'unknown-service'), { code: 5 });
        const { Health } = eppClients();
        const client = new Health(address, credentials.createInsecure());
        const list = await new Promise<{ statuses: Record<string, { status: string }> }>(
          (resolve, reject) =>
            client.List({}, (err: Error | null, res: never) => (err ? reject(err) : resolve(res))),
        );
        assert.deepEqual(Object.keys(list.statuses).sort(), [...HEALTH_SERVICES].sort());
        client.close();
      }
    });

    test('Watch sends the status at once (SERVICE_UNKNOWN for an unknown name)', async () => {
      const { Health } = eppClients();
      const client = new Health(`127.0.0.1:${epp.healthPort}`, credentials.createInsecure());
      for (const [service, expected] of [
        ['readiness', 'SERVING'],
        ['nope', 'SERVICE_UNKNOWN'],
      ] as const) {
        const call = client.Watch({ service });
        const first = await new Promise<string>((resolve, reject) => {
          call.once('data', (m: { status: string }) => resolve(m.status));
          call.once('error', reject);
        });
        assert.equal(first, expected, service);
        call.on('error', () => {});
        call.cancel();
      }
      client.close();
    });

    test('/metrics and /router/replicas on the metrics port', async () => {
      const base = `http://127.0.0.1:${epp.metricsPort}`;
      const metrics = await (await fetch(`${base}/metrics`)).text();
      assert.match(metrics, /^# TYPE kvroute_gateway_decisions_total counter$/m);
      const state = (await (await fetch(`${base}/router/replicas`)).json()) as {
        replicas: unknown[];
      };
      assert.equal(state.replicas.length, 1);
      assert.equal((await fetch(`${base}/health`)).status, 200);
    });
  });
});
