/**
 * Engines found through NATS (JetStream key-value, on a `nats-server -js` started here): an
 * engine registers itself (`kvroute engine --nats --advertise`), a gateway with `--nats` and no
 * backend routes to it, and drops it when the engine stops; an entry nobody refreshes expires.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { connect } from '@nats-io/transport-node';
import { Kvm } from '@nats-io/kv';
import { defaultConfig } from '../../src/serving/config.ts';
import { startGateway } from '../../src/gateway/gateway.ts';
import {
  bucketName,
  type EngineEntry,
  engineKey,
  followEngines,
} from '../../src/sync/discovery.ts';
import { complete, type GatewayHandle, tokens, waitFor } from '../support/gateway.harness.ts';
import { type NatsServer, natsServerInstalled, startNatsServer } from '../support/natsServer.ts';

const skip = natsServerInstalled()
  ? false
  : 'nats-server is not installed (apt-get install nats-server)';
const BIN = fileURLToPath(new URL('../../bin/kvroute.js', import.meta.url));

/** `kvroute engine` as a process; resolves with its ready line's fields. */
function startEngineProcess(
  args: string[],
): Promise<{ child: ChildProcess; url: string; events: string }> {
  const child = spawn(process.execPath, [BIN, 'engine', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`engine not ready: ${out}${err}`)), 30_000);
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /ready url=(\S+) model=\S+ events=(\S+) replay=\S+ registered=/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, url: m[1]!, events: m[2]! });
      }
    });
    child.stderr!.on('data', (d: Buffer) => {
      err += d.toString();
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`engine exited with ${code}: ${err}`));
    });
  });
}

describe('engines registered in NATS', { skip }, () => {
  let nats: NatsServer;
  const children: ChildProcess[] = [];
  let gateway: GatewayHandle | null = null;

  before(async () => {
    nats = await startNatsServer({ jetstream: true });
  });

  after(async () => {
    await gateway?.close();
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    await nats.close();
  });

  test('a registered engine is routed to by a gateway without backends, and dropped when it stops', async () => {
    const engine = await startEngineProcess([
      ...['--port', '0', '--speedup', '100', '--kv-events', 'tcp://127.0.0.1:*'],
      ...['--nats', nats.url, '--cluster', 'disc'],
    ]);
    children.push(engine.child);
    // The entry as the engine wrote it.
    const nc = await connect({ servers: nats.url });
    const kv = await new Kvm(nc).open(bucketName('disc'));
    const keys: string[] = [];
    for await (const k of await kv.keys()) keys.push(k);
    assert.equal(keys.length, 1);
    const entry = (await kv.get(keys[0]!))!.json<EngineEntry>();
    assert.deepEqual(entry, {
      url: engine.url,
      events: engine.events,
      replay: null,
      model: 'llama-3.3-70b',
    });
    await nc.close();

    gateway = await startGateway({
      ...defaultConfig(),
      // The replica header names the address: the tests read the router by it.
      exposeReplicaAddresses: true,
      port: 0,
      nats: {
        url: nats.url,
        cluster: 'disc',
        heartbeatMs: 200,
        peerTimeoutMs: 1_000,
        stateEveryMs: 60_000,
      },
    });
    await waitFor(
      () => gateway!.backends().some((b) => b.url === engine.url && b.state === 'active'),
      'the gateway to take the registered engine',
      30_000,
    );
    const answer = await complete(gateway.url, { prompt: tokens(1, 64), max_tokens: 2 });
    assert.equal(answer.status, 200, answer.text);
    assert.equal(answer.replica, new URL(engine.url).host);

    const exited = new Promise((r) => engine.child.once('exit', r));
    engine.child.kill('SIGTERM');
    await exited;
    await waitFor(() => gateway!.backends().length === 0, 'the stopped engine to leave', 30_000);
  });

  test('an entry nobody refreshes expires (the bucket TTL), and the follower drops it', async () => {
    const added: string[] = [];
    const removed: string[] = [];
    const follower = await followEngines(
      { url: nats.url, cluster: 'ttl', ttlMs: 1_000 },
      { onAdd: (e) => added.push(e.url), onRemove: (e) => removed.push(e.url) },
    );
    try {
      const nc = await connect({ servers: nats.url });
      const kv = await new Kvm(nc).open(bucketName('ttl'));
      // Each under its own address's key (engineKey): an entry under another's is refused.
      await kv.put(
        engineKey('http://127.0.0.1:9'),
        JSON.stringify({ url: 'http://127.0.0.1:9', events: null, replay: null, model: null }),
      );
      await waitFor(() => added.length === 1, 'the entry to be seen');
      assert.deepEqual(removed, []);
      await waitFor(() => removed.length === 1, 'the entry to expire', 30_000);
      assert.equal(await kv.get(engineKey('http://127.0.0.1:9')), null, 'the server forgot it too');
      // The watcher reads the bucket in order: once the valid entry written after the malformed
      // one has been added, the malformed one has been read (and must have been ignored).
      await kv.put('bad', 'not json');
      await kv.put(
        engineKey('http://127.0.0.1:10'),
        JSON.stringify({ url: 'http://127.0.0.1:10', events: null, replay: null, model: null }),
      );
      await waitFor(() => added.length >= 2, 'the entry written after the malformed one');
      assert.deepEqual(
        added,
        ['http://127.0.0.1:9', 'http://127.0.0.1:10'],
        'a malformed entry is ignored',
      );
      await nc.close();
    } finally {
      await follower.close();
    }
  });
});
