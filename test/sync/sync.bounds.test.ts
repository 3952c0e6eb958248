/**
 * The pure checks behind what a gateway accepts over NATS: field ranges and peer ids
 * (bounds.ts, records.ts), the goodbye proof (goodbye.ts), the discovery allow-list
 * (discoveryPolicy.ts), and the credential flags (cli/natsFlags.ts, sync/natsAuth.ts).
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { flagSpec, readFlags } from '../../src/cli/args.ts';
import { NATS_AUTH_FLAG_NAMES, readNatsAuth } from '../../src/cli/natsFlags.ts';
import { readServeConfig } from '../../src/cli/serve.ts';
import {
  admitsPeer,
  DEFAULT_SYNC_LIMITS,
  entryRoom,
  isPeerId,
  limitsOf,
  MAX_PROMPT_TOKENS,
} from '../../src/sync/bounds.ts';
import { allowListOf, patternError, refusal } from '../../src/sync/discoveryPolicy.ts';
import { commitmentOf, isGenuineGoodbye, makeGoodbye } from '../../src/sync/goodbye.ts';
import { natsConnectOptions } from '../../src/sync/natsAuth.ts';
import { decodeHeartbeat, decodeRouteMessage, decodeSnapshot } from '../../src/sync/records.ts';

describe('bounds', () => {
  test('room for entries never goes negative and is the bound minus what is held', () => {
    const limits = limitsOf({ maxEntriesPerPeer: 100 });
    fc.assert(
      fc.property(fc.nat(1_000), (held) => {
        const room = entryRoom(held, limits);
        assert.ok(room >= 0);
        assert.equal(held + room >= 100, true);
        if (held < 100) assert.equal(held + room, 100);
      }),
    );
  });

  test('a new peer is admitted only below the bound; a known one always', () => {
    fc.assert(
      fc.property(fc.nat(200), fc.boolean(), (count, known) => {
        const ok = admitsPeer(known, count, DEFAULT_SYNC_LIMITS);
        assert.equal(ok, known || count < DEFAULT_SYNC_LIMITS.maxPeers);
      }),
    );
  });

  test('peer ids are one subject token, 1 to 64 characters', () => {
    assert.ok(isPeerId('0b6f8a8e-1c55-4b55-9b1c-0d5c7b7e9b11'));
    for (const bad of ['', 'a.b', 'a b', '*', '>', 'x'.repeat(65), 3, null]) {
      assert.ok(!isPeerId(bad), String(bad));
    }
  });

  test('records out of range are dropped whole', () => {
    const msg = (r: unknown[]) => JSON.stringify({ g: 'a', m: null, r: [r] });
    assert.ok(decodeRouteMessage(msg(['r', 'q', 'r0', 32, 32, 16, 0, [1, 2], null])));
    const bad = [
      ['r', 'q', 'r0', MAX_PROMPT_TOKENS + 1, 0, 16, 0, [], null],
      ['r', 'q', 'r0', 32, 32, 16, 0, [1, 2, 3], null], // more keys than blocks
      ['r', 'q', 'r0', 32, 32, 16, 3, [], null], // starts past the prompt
      ['r', 'q', 'r0', 32, 32, 1e9, 0, [], null],
      ['r', 'q'.repeat(300), 'r0', 32, 32, 16, 0, [], null],
    ];
    for (const r of bad) assert.equal(decodeRouteMessage(msg(r)), null, JSON.stringify(r));
    // A number JSON reads as Infinity.
    assert.equal(
      decodeRouteMessage('{"g":"a","m":null,"r":[["r","q","r0",1e999,0,16,0,[],null]]}'),
      null,
    );
    assert.equal(decodeRouteMessage(JSON.stringify({ g: 'a.b', m: null, r: [] })), null);
    assert.equal(decodeSnapshot(JSON.stringify({ g: 'x y', p: [] })), null);
  });

  test('any JSON decodes to null or to values in range', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const m = decodeRouteMessage(JSON.stringify({ g: 'a', m: null, r: [v] }));
        if (m === null || !('routes' in m)) return;
        for (const r of m.routes) {
          if (r.kind !== 'route') continue;
          assert.ok(r.route.promptTokens <= MAX_PROMPT_TOKENS);
          assert.ok(r.route.uncachedTokens <= r.route.promptTokens);
        }
      }),
    );
  });
});

describe('the goodbye proof', () => {
  test('only the secret behind the pinned commitment says goodbye', () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), (secret, guess) => {
        const g = makeGoodbye(secret);
        assert.ok(isGenuineGoodbye(g.commitment, secret));
        assert.equal(isGenuineGoodbye(g.commitment, guess), guess === secret);
        assert.ok(!isGenuineGoodbye(undefined, secret), 'nothing pinned: no goodbye');
      }),
    );
    const g = makeGoodbye();
    assert.equal(g.commitment, commitmentOf(g.secret));
    assert.notEqual(makeGoodbye().secret, g.secret);
  });

  test('heartbeats carry the commitment, goodbyes the secret', () => {
    const k = 'ab'.repeat(32);
    assert.deepEqual(decodeHeartbeat(JSON.stringify({ g: 'a', k })), {
      sender: 'a',
      commitment: k,
    });
    assert.deepEqual(decodeHeartbeat(JSON.stringify({ g: 'a', bye: k })), { sender: 'a', bye: k });
    assert.equal(decodeHeartbeat(JSON.stringify({ g: 'a', k: 'short' })), null);
    assert.equal(decodeHeartbeat(JSON.stringify({ g: 'a', bye: 'nothex' })), null);
  });
});

describe('the discovery allow-list', () => {
  const allowed = allowListOf(['10.0.0.0/8', 'fd00::/8', '192.168.1.7', '*.engines.svc', 'gpu-0']);

  test('CIDRs, addresses, names and suffixes', () => {
    for (const host of [
      '10.1.2.3',
      '[fd00::1]',
      'fd00::2',
      '192.168.1.7',
      'a.engines.svc',
      'GPU-0',
    ]) {
      assert.ok(allowed(host), host);
    }
    for (const host of [
      '11.0.0.1',
      '192.168.1.8',
      'engines.svc',
      'x.engines.svc.evil',
      'gpu-1',
      '::1',
    ]) {
      assert.ok(!allowed(host), host);
    }
    assert.ok(allowListOf([])('203.0.113.9'), 'no list: any address');
  });

  test('every IPv4 address matches 10.0.0.0/8 exactly when its first byte is 10', () => {
    fc.assert(
      fc.property(fc.ipV4(), (ip) => {
        assert.equal(allowed(ip), ip.startsWith('10.') || ip === '192.168.1.7');
      }),
    );
  });

  test('patterns are checked', () => {
    for (const ok of ['10.0.0.0/8', '::1', 'fd00::/8', 'a-b.c', '*.svc.cluster.local']) {
      assert.equal(patternError(ok), null, ok);
    }
    for (const bad of ['10.0.0.0/33', 'x/8', '*', 'a..b', 'http://x', '']) {
      assert.notEqual(patternError(bad), null, bad);
    }
  });

  test('an entry under another address’s key, outside the list, or past the bound is refused', () => {
    const held = new Set(['10_0_0_1_8000']);
    const c = (url: string, key: string) => ({ key, ownKey: key, url, events: null, replay: null });
    assert.equal(refusal(c('http://10.0.0.2:8000', '10_0_0_2_8000'), allowed, held, 5), null);
    assert.match(
      refusal(
        { ...c('http://10.0.0.9:1', '10_0_0_1_8000'), ownKey: '10_0_0_9_1' },
        allowed,
        held,
        5,
      )!,
      /key/,
    );
    assert.match(refusal(c('http://8.8.8.8:80', 'k'), allowed, held, 5)!, /discovery-allow/);
    assert.match(
      refusal({ ...c('http://10.0.0.2:1', 'k'), events: 'tcp://8.8.8.8:5557' }, allowed, held, 5)!,
      /tcp:\/\/8\.8\.8\.8/,
    );
    assert.match(refusal(c('http://10.0.0.2:1', 'k'), allowed, held, 1)!, /max-backends/);
    assert.equal(refusal(c('http://10.0.0.1:8000', '10_0_0_1_8000'), allowed, held, 1), null);
  });
});

describe('NATS credentials and TLS flags', () => {
  const SPEC = flagSpec({
    string: `nats cluster nats-heartbeat-ms nats-peer-timeout-ms ${NATS_AUTH_FLAG_NAMES} nats-max-peers nats-max-peer-entries nats-max-message-bytes discovery-allow discovery-max-backends`,
  });
  const flagsOf = (argv: string[]) => {
    const f = readFlags(argv, SPEC);
    if (f === 'help') throw new Error('help');
    return f;
  };
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-nats-auth-'));
  const file = (name: string, text: string): string => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };

  test('secrets from files or the environment, not argv', () => {
    const pass = file('pass', 's3cret\n');
    assert.deepEqual(
      readNatsAuth(flagsOf(['--nats-user', 'gw', '--nats-password-file', pass]), {}),
      { user: 'gw', password: 's3cret' },
    );
    assert.deepEqual(readNatsAuth(flagsOf(['--nats-user', 'gw']), { KVROUTE_NATS_PASSWORD: 'p' }), {
      user: 'gw',
      password: 'p',
    });
    assert.deepEqual(readNatsAuth(flagsOf([]), { KVROUTE_NATS_TOKEN: 't' }), { token: 't' });
    assert.equal(readNatsAuth(flagsOf([]), {}), null);
    const creds = file('x.creds', '-----BEGIN NATS USER JWT-----\n');
    const ca = file('ca.pem', 'pem');
    assert.deepEqual(readNatsAuth(flagsOf(['--nats-creds-file', creds, '--nats-tls-ca', ca]), {}), {
      credsFile: creds,
      tlsCa: ca,
    });
  });

  test('a bad combination is one line naming the flag', () => {
    const pass = file('pass2', 'x');
    const token = file('token', 'x');
    assert.throws(() => readNatsAuth(flagsOf(['--nats-user', 'gw']), {}), /--nats-password-file/);
    assert.throws(
      () => readNatsAuth(flagsOf(['--nats-password-file', pass]), {}),
      /needs --nats-user/,
    );
    assert.throws(
      () =>
        readNatsAuth(
          flagsOf(['--nats-user', 'gw', '--nats-password-file', pass, '--nats-token-file', token]),
          {},
        ),
      /one of/,
    );
    assert.throws(() => readNatsAuth(flagsOf(['--nats-tls-cert', pass]), {}), /go together/);
    assert.throws(
      () => readNatsAuth(flagsOf(['--nats-creds-file', join(dir, 'missing')]), {}),
      /--nats-creds-file: cannot read/,
    );
    assert.throws(
      () => readNatsAuth(flagsOf(['--nats-token-file', file('empty', '')]), {}),
      /empty/,
    );
  });

  test('serve takes them with --nats only, and the bounds and allow-list with them', () => {
    const pass = file('pass3', 'pw');
    assert.throws(
      () => readServeConfig(flagsOf(['--nats-user', 'gw', '--nats-password-file', pass])),
      /needs --nats URL/,
    );
    const c = readServeConfig(
      flagsOf([
        ...['--nats', 'tls://nats:4222', '--nats-user', 'gw', '--nats-password-file', pass],
        ...['--nats-max-peer-entries', '500', '--discovery-allow', '10.0.0.0/8, *.svc'],
      ]),
    );
    assert.deepEqual(c.nats?.auth, { user: 'gw', password: 'pw' });
    assert.deepEqual(c.nats?.limits, { maxEntriesPerPeer: 500 });
    assert.deepEqual(c.nats?.discovery, { allow: ['10.0.0.0/8', '*.svc'], maxBackends: 256 });
    assert.throws(
      () => readServeConfig(flagsOf(['--nats', 'nats://a:1', '--discovery-allow', '10.0.0.0/40'])),
      /--discovery-allow '10\.0\.0\.0\/40'/,
    );
  });

  test('the client options: one authenticator, TLS files as given', () => {
    assert.deepEqual(natsConnectOptions(null), {});
    const o = natsConnectOptions({ token: 't', tlsCa: '/ca', tlsCert: '/c', tlsKey: '/k' });
    assert.equal(typeof o.authenticator, 'function');
    assert.deepEqual(o.tls, { caFile: '/ca', certFile: '/c', keyFile: '/k' });
    assert.equal(natsConnectOptions({ tlsCa: '/ca' }).authenticator, undefined);
  });
});
