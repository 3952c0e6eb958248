/**
 * The picker's gRPC ports close connections that hold no stream: one that sends nothing at all,
 * and one that sends only the HTTP/2 preface and its SETTINGS, are closed once the configured
 * idle limit (and keepalive) passes; a connection in use stays open while its stream does.
 */
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { credentials, type Client, makeGenericClientConstructor } from '@grpc/grpc-js';
import { readGrpcLimits } from '../../src/cli/epp.ts';
import { flagSpec, readFlags } from '../../src/cli/args.ts';
import { type EppFleetHandle, startEppWithFleet } from '../../src/embedded/epp.ts';
import { DEFAULT_GRPC_LIMITS, grpcServerOptions } from '../../src/epp/server.ts';
import { defaultConfig } from '../../src/serving/config.ts';
import { within } from '../support/gateway.harness.ts';

/** The HTTP/2 client preface and an empty SETTINGS frame (RFC 9113 section 3.4). */
const PREFACE = Buffer.concat([
  Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'),
  Buffer.from([0, 0, 0, 0x04, 0, 0, 0, 0, 0]),
]);

/** A raw connection that reads what comes and resolves when the server closes it. */
function rawConnection(port: number, send: Buffer | null): Promise<{ goaway: boolean }> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let bytes = Buffer.alloc(0);
    socket.on('data', (d) => {
      bytes = Buffer.concat([bytes, d]);
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      // Frame type 0x7 at offset 3 of some frame header: a GOAWAY was sent before the close.
      let goaway = false;
      for (let at = 0; at + 9 <= bytes.length; at += 9 + bytes.readUIntBE(at, 3)) {
        if (bytes[at + 3] === 0x07) goaway = true;
      }
      resolve({ goaway });
    });
    if (send) socket.write(send);
  });
}

describe('idle connections at the ext_proc port', () => {
  let epp: EppFleetHandle;

  before(async () => {
    epp = await startEppWithFleet(
      { ...defaultConfig(), embeddedReplicas: 1 },
      {
        host: '127.0.0.1',
        port: 0,
        healthPort: 0,
        metricsPort: null,
        grpc: { idleMs: 300, keepaliveMs: 200, keepaliveTimeoutMs: 200 },
      },
    );
  });
  after(() => epp.close());

  test('a connection that sends nothing is closed', async () => {
    await within(120_000, rawConnection(epp.port, null), 'the silent connection');
  });

  test('a connection that sends only the HTTP/2 preface is closed with a GOAWAY', async () => {
    const closed = await within(120_000, rawConnection(epp.port, PREFACE), 'the preface-only one');
    assert.equal(closed.goaway, true);
    // The health port has the same limits.
    await within(120_000, rawConnection(epp.healthPort!, PREFACE), 'the health port one');
  });

  test('a real client that finished its call is let go, and can call again', async () => {
    const Health = makeGenericClientConstructor({}, 'grpc.health.v1.Health');
    const client: Client = new Health(`127.0.0.1:${epp.port}`, credentials.createInsecure());
    try {
      const check = () =>
        new Promise<Buffer>((resolve, reject) =>
          client.makeUnaryRequest(
            '/grpc.health.v1.Health/Check',
            (b: Buffer) => b,
            (b: Buffer) => b,
            Buffer.alloc(0),
            (err, res) => (err ? reject(err) : resolve(res!)),
          ),
        );
      await check();
      // The server closes the idle connection (GOAWAY): the channel leaves READY...
      await within(
        120_000,
        new Promise<void>((resolve) => {
          const channel = client.getChannel();
          const watch = (): void => {
            const state = channel.getConnectivityState(false);
            if (state !== 2)
              resolve(); // 2: READY
            else channel.watchConnectivityState(state, Infinity, watch);
          };
          watch();
        }),
        'the idle client connection closed',
      );
      // ... and the next call reconnects.
      await check();
    } finally {
      client.close();
    }
  });
});

test('the limits as grpc-js options, their defaults and flags', () => {
  assert.deepEqual(grpcServerOptions(DEFAULT_GRPC_LIMITS), {
    'grpc.max_connection_idle_ms': 60_000,
    'grpc.keepalive_time_ms': 30_000,
    'grpc.keepalive_timeout_ms': 10_000,
  });
  const spec = flagSpec({
    string:
      'grpc-idle-ms grpc-keepalive-ms grpc-keepalive-timeout-ms grpc-max-age-ms grpc-max-age-grace-ms',
  });
  const flags = readFlags(['--grpc-idle-ms', '5000', '--grpc-max-age-ms', '600000'], spec);
  assert.ok(flags !== 'help');
  const limits = readGrpcLimits(flags);
  assert.deepEqual(grpcServerOptions(limits), {
    'grpc.max_connection_idle_ms': 5_000,
    'grpc.keepalive_time_ms': 30_000,
    'grpc.keepalive_timeout_ms': 10_000,
    'grpc.max_connection_age_ms': 600_000,
  });
  const bad = readFlags(['--grpc-idle-ms', '0'], spec);
  assert.ok(bad !== 'help');
  assert.throws(() => readGrpcLimits(bad), /--grpc-idle-ms/);
});
