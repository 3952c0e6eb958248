/**
 * NATS credentials beyond user and password, against a real `nats-server`: TLS (the server's
 * certificate checked against a CA made here by `openssl`), mutual TLS, an nkey user and a
 * creds file (decentralised auth: operator, account and user JWTs made here). In each case a
 * gateway given the secrets (`src/sync/natsAuth.ts`, as `--nats-tls-ca`, `--nats-tls-cert`/
 * `--nats-tls-key`, `--nats-nkey-file`, `--nats-creds` give them) connects and shares its state,
 * and a client without them is refused. Skips where `nats-server` or `openssl` is missing, and
 * the nkey and creds cases where `@nats-io/nkeys` cannot be loaded.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { connect } from '@nats-io/transport-node';
import type { NatsAuth } from '../../src/sync/natsAuth.ts';
import { natsConnectOptions } from '../../src/sync/natsAuth.ts';
import type { SyncConfig } from '../../src/sync/stateSync.ts';
import {
  type EngineServerHandle,
  type GatewayHandle,
  startEngines,
  startGatewayFor,
  waitFor,
} from '../support/gateway.harness.ts';
import { type NatsServer, natsServerInstalled, startNatsServer } from '../support/natsServer.ts';
import {
  loadNkeys,
  makeOperator,
  makeTlsFiles,
  type Nkeys,
  opensslInstalled,
  type TlsFiles,
} from '../support/natsSecrets.ts';

const skip = !natsServerInstalled()
  ? 'nats-server is not installed (apt-get install nats-server)'
  : !opensslInstalled()
    ? 'openssl is not installed'
    : false;
const nkeys: Nkeys | null = skip === false ? await loadNkeys() : null;
const skipNkeys =
  skip !== false ? skip : nkeys === null ? '@nats-io/nkeys is not installed' : false;

const syncOf = (url: string, cluster: string, auth: NatsAuth): SyncConfig => ({
  url,
  cluster,
  heartbeatMs: 200,
  peerTimeoutMs: 60_000,
  stateEveryMs: 60_000,
  auth,
});

/** A client that must be refused: connecting rejects (no connection is left open). */
async function refused(url: string, auth: NatsAuth | null, what: string): Promise<void> {
  await assert.rejects(
    (async () => {
      const nc = await connect({
        servers: url,
        reconnect: false,
        timeout: 20_000,
        ...natsConnectOptions(auth),
      });
      await nc.close();
    })(),
    (err: unknown) => err instanceof Error,
    what,
  );
}

describe('NATS with TLS, nkeys and creds files', { skip }, () => {
  let dir: string;
  let tls: TlsFiles;
  let engines: EngineServerHandle[];
  const servers: NatsServer[] = [];
  const gateways: GatewayHandle[] = [];

  /** A nats-server run from a configuration file of these lines. */
  const serve = async (name: string, config: string): Promise<NatsServer> => {
    const file = join(dir, `${name}.conf`);
    writeFileSync(file, `${config}\n`);
    const s = await startNatsServer({ args: ['-c', file] });
    servers.push(s);
    return s;
  };

  /** Two gateways sharing state through `url` with `auth`: each hears the other. */
  const twoPeersMeet = async (url: string, cluster: string, auth: NatsAuth) => {
    const pair: GatewayHandle[] = [];
    for (let i = 0; i < 2; i++) {
      const gw = await startGatewayFor(engines, { nats: syncOf(url, cluster, auth) });
      gateways.push(gw);
      pair.push(gw);
    }
    for (const gw of pair) {
      await waitFor(() => gw.sync!.stats().connected, 'the gateway to connect', 30_000);
      await waitFor(() => gw.sync!.stats().peers.length >= 1, 'the other gateway heard', 30_000);
    }
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kvroute-nats-secrets-'));
    tls = makeTlsFiles(dir);
    engines = await startEngines(1, { speedup: 50 });
  });

  after(async () => {
    for (const gw of gateways.reverse()) await gw.close();
    for (const e of engines ?? []) await e.close();
    for (const s of servers) await s.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('TLS: gateways that trust the CA connect; a client that does not is refused', async () => {
    const s = await serve(
      'tls',
      `tls {\n  cert_file: "${tls.serverCert}"\n  key_file: "${tls.serverKey}"\n}`,
    );
    const url = `tls://127.0.0.1:${s.port}`;
    await twoPeersMeet(url, 'tls', { tlsCa: tls.ca });
    await refused(url, null, 'a client that does not know the CA');
  });

  test('mutual TLS: a client certificate is required', async () => {
    const s = await serve(
      'mtls',
      `tls {\n  cert_file: "${tls.serverCert}"\n  key_file: "${tls.serverKey}"\n  ca_file: "${tls.ca}"\n  verify: true\n}`,
    );
    const url = `tls://127.0.0.1:${s.port}`;
    await twoPeersMeet(url, 'mtls', {
      tlsCa: tls.ca,
      tlsCert: tls.clientCert,
      tlsKey: tls.clientKey,
    });
    await refused(url, { tlsCa: tls.ca }, 'a client without a certificate');
  });

  test('an nkey user: its seed connects; no key, or another key, is refused', {
    skip: skipNkeys,
  }, async () => {
    const user = nkeys!.createUser();
    const seedFile = join(dir, 'user.nk');
    writeFileSync(seedFile, `${Buffer.from(user.getSeed()).toString('utf8')}\n`, { mode: 0o600 });
    const other = join(dir, 'other.nk');
    writeFileSync(other, Buffer.from(nkeys!.createUser().getSeed()).toString('utf8'), {
      mode: 0o600,
    });
    const s = await serve(
      'nkey',
      `authorization {\n  users: [ { nkey: "${user.getPublicKey()}" } ]\n}`,
    );
    await twoPeersMeet(s.url, 'nkey', { nkeyFile: seedFile });
    await refused(s.url, null, 'no key');
    await refused(s.url, { nkeyFile: other }, 'a key the server does not know');
  });

  test('a creds file (operator, account, user JWTs): it connects; none is refused', {
    skip: skipNkeys,
  }, async () => {
    const op = makeOperator(nkeys!, dir);
    const s = await serve('creds', op.serverConfig);
    await twoPeersMeet(s.url, 'creds', { credsFile: op.creds });
    await refused(s.url, null, 'no creds');
    const stranger = makeOperator(nkeys!, mkdtempSync(join(dir, 'stranger-')));
    await refused(s.url, { credsFile: stranger.creds }, "another operator's user");
  });
});
