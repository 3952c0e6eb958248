/** The flags of several gateways: `serve --nats/--cluster/...` and `engine --nats/--advertise`. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { flagSpec, readFlags } from '../../src/cli/args.ts';
import { readServeConfig } from '../../src/cli/serve.ts';
import { modelToken, subjectsOf } from '../../src/sync/subjects.ts';
import { runCli } from '../support/cli.ts';

const SPEC = flagSpec({ string: 'nats cluster nats-heartbeat-ms nats-peer-timeout-ms' });

function serveConfig(argv: string[]) {
  const flags = readFlags(argv, SPEC);
  if (flags === 'help') throw new Error('unexpected help');
  return readServeConfig(flags);
}

describe('serve --nats', () => {
  test('the sync settings, with defaults; none without --nats', () => {
    assert.equal(serveConfig([]).nats, null);
    assert.deepEqual(serveConfig(['--nats', 'nats://10.0.0.1:4222']).nats, {
      url: 'nats://10.0.0.1:4222',
      cluster: 'default',
      heartbeatMs: 1_000,
      peerTimeoutMs: 3_000,
      stateEveryMs: 10_000,
    });
    const c = serveConfig([
      '--nats',
      'nats://a:1',
      '--cluster',
      'prod-1',
      '--nats-heartbeat-ms',
      '2000',
    ]);
    assert.equal(c.nats?.cluster, 'prod-1');
    assert.equal(c.nats?.peerTimeoutMs, 6_000, 'three heartbeats at least');
  });

  test('bad values name the flag', () => {
    assert.throws(() => serveConfig(['--cluster', 'x']), /--cluster needs --nats URL/);
    assert.throws(() => serveConfig(['--nats', 'localhost:4222']), /--nats must be nats:\/\//);
    assert.throws(
      () => serveConfig(['--nats', 'nats://a:1', '--cluster', 'a.b']),
      /--cluster takes/,
    );
    assert.throws(
      () =>
        serveConfig([
          '--nats',
          'nats://a:1',
          '--nats-heartbeat-ms',
          '500',
          '--nats-peer-timeout-ms',
          '400',
        ]),
      /must exceed --nats-heartbeat-ms/,
    );
  });

  test('the CLI exits 2 with one line for a bad flag, engine and serve alike', () => {
    const serve = runCli(['serve', '--nats-peer-timeout-ms', '100']);
    assert.equal(serve.status, 2);
    assert.match(serve.stderr, /--nats-peer-timeout-ms needs --nats URL/);
    const engine = runCli(['engine', '--port', '0', '--advertise', 'http://h:1']);
    assert.equal(engine.status, 2);
    assert.match(engine.stderr, /--advertise needs --nats URL/);
    const bad = runCli(['engine', '--port', '0', '--nats', 'nats://a:1', '--advertise', 'h:1']);
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /--advertise must be http/);
  });
});

describe('subjects', () => {
  test('a model name is one subject token', () => {
    assert.equal(modelToken('meta-llama/Llama-3.3-70B'), 'meta-llama~2fLlama-3~2e3-70B');
    assert.equal(modelToken(null), '~');
    assert.equal(modelToken('a b*>'), 'a~20b~2a~3e');
    assert.equal(subjectsOf('c').route('m.1'), 'kvroute.c.m~2e1.route');
  });
});
