/**
 * What a gateway accepts from NATS, against a real `nats-server` started here: with credentials
 * required, a gateway (and an engine registering, and a gateway following discovery) given them
 * connects and a client without is refused; a forged goodbye drops no peer; a snapshot is taken
 * only from a peer heard beating, in its own name, of its own entries; one peer's entries, the
 * peers and the message size are bounded; a discovery entry overwritten with another address,
 * or one outside the allow-list, is not taken. No timing is asserted: each wait is for a later
 * message of the same sender (NATS keeps a connection's order), bounded.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { Kvm } from '@nats-io/kv';
import type { Router } from '../../src/router/index.ts';
import { bucketName, engineKey, followEngines, registerEngine } from '../../src/sync/discovery.ts';
import type { SyncConfig } from '../../src/sync/stateSync.ts';
import { subjectsOf } from '../../src/sync/subjects.ts';
import {
  type EngineServerHandle,
  type GatewayHandle,
  startEngines,
  startGatewayFor,
  waitFor,
} from '../support/gateway.harness.ts';
import { type NatsServer, natsServerInstalled, startNatsServer } from '../support/natsServer.ts';

const skip = natsServerInstalled()
  ? false
  : 'nats-server is not installed (apt-get install nats-server)';
const BLOCK = 16;

const heldFor = (router: Router, peer: string): string[] =>
  router
    .inFlight()
    .filter((r) => r.peer === peer)
    .map((r) => r.requestId)
    .sort();

const syncOf = (url: string, cluster: string, more: Partial<SyncConfig> = {}): SyncConfig => ({
  url,
  cluster,
  heartbeatMs: 200,
  peerTimeoutMs: 60_000,
  stateEveryMs: 60_000,
  ...more,
});

describe('NATS with credentials required', { skip }, () => {
  let nats: NatsServer;
  let engines: EngineServerHandle[];
  const closers: (() => Promise<unknown>)[] = [];
  const auth = { user: 'kvroute', password: 'a-long-secret' };

  before(async () => {
    nats = await startNatsServer({
      jetstream: true,
      args: ['--user', auth.user, '--pass', auth.password],
    });
    engines = await startEngines(1, { speedup: 50 });
  });

  after(async () => {
    for (const close of closers.reverse()) await close();
    for (const e of engines) await e.close();
    await nats.close();
  });

  test('a gateway with them connects; a client without is refused', async () => {
    const gw = await startGatewayFor(engines, { nats: syncOf(nats.url, 'auth', { auth }) });
    closers.push(() => gw.close());
    await waitFor(() => gw.sync!.stats().connected, 'the gateway to connect', 15_000);
    await assert.rejects(
      connect({ servers: nats.url, reconnect: false }),
      /Authorization|auth/i,
      'no credentials, no connection',
    );
    await assert.rejects(
      connect({ servers: nats.url, reconnect: false, user: 'kvroute', pass: 'wrong' }),
      /Authorization|auth/i,
    );
  });

  test('an engine registers and a gateway follows discovery with them', async () => {
    const seen: string[] = [];
    const follower = await followEngines(
      { url: nats.url, cluster: 'auth', auth },
      { onAdd: (e) => seen.push(e.url), onRemove: () => {} },
    );
    closers.push(() => follower.close());
    const registration = await registerEngine({
      url: nats.url,
      cluster: 'auth',
      auth,
      entry: { url: 'http://127.0.0.1:7001', events: null, replay: null, model: null },
    });
    closers.push(() => registration.close());
    await waitFor(() => seen.includes('http://127.0.0.1:7001'), 'the registered engine');
  });
});

describe('what a gateway accepts from its peers', { skip }, () => {
  let nats: NatsServer;
  let engines: EngineServerHandle[];
  let wire: NatsConnection;
  const gateways: GatewayHandle[] = [];
  let model: string | null;
  let replica: string;

  const join = async (cluster: string, more: Partial<SyncConfig> = {}) => {
    const gw = await startGatewayFor(engines, { nats: syncOf(nats.url, cluster, more) });
    gateways.push(gw);
    await gw.sync!.ready;
    return gw;
  };

  /** A route record of a request of 32 prompt tokens, none cached. */
  const route = (id: string): unknown[] => ['r', id, replica, 32, 32, BLOCK, 0, [], null];

  before(async () => {
    nats = await startNatsServer();
    engines = await startEngines(1, { speedup: 50 });
    wire = await connect({ servers: nats.url });
    const probe = await startGatewayFor(engines);
    model = probe.pools.first!.model;
    replica = probe.router.replicaNames[0]!;
    await probe.close();
  });

  after(async () => {
    await wire?.close();
    for (const g of gateways) await g.close();
    for (const e of engines) await e.close();
    await nats?.close();
  });

  test('a forged goodbye does not drop a real peer; its own goodbye does', async () => {
    const cluster = 'bye';
    const subjects = subjectsOf(cluster);
    const a = await join(cluster);
    const b = await join(cluster);
    const aId = a.sync!.id;
    await waitFor(() => b.sync!.stats().peers.some((p) => p.id === aId), 'B to hear A');
    wire.publish(subjects.route(model), JSON.stringify({ g: aId, m: model, r: [route('q1')] }));
    await waitFor(() => heldFor(b.router, aId).length === 1, 'B to hold A’s entry');
    // Goodbyes in A's name: the old form, a guessed secret, and a heartbeat with another proof.
    wire.publish(subjects.heartbeat, JSON.stringify({ g: aId, bye: true }));
    wire.publish(subjects.heartbeat, JSON.stringify({ g: aId, bye: 'ab'.repeat(32) }));
    wire.publish(subjects.heartbeat, JSON.stringify({ g: aId, k: 'cd'.repeat(32) }));
    wire.publish(subjects.heartbeat, JSON.stringify({ g: 'bye-sentinel' }));
    await wire.flush();
    await waitFor(
      () => b.sync!.stats().peers.some((p) => p.id === 'bye-sentinel'),
      'B to read the forged goodbyes (the heartbeat after them)',
    );
    assert.ok(
      b.sync!.stats().peers.some((p) => p.id === aId),
      'A is still B’s peer',
    );
    assert.deepEqual(heldFor(b.router, aId), ['q1'], 'with its entry');
    assert.ok(b.sync!.stats().refused >= 3, 'the forgeries are counted');
    await a.close();
    await waitFor(() => !b.sync!.stats().peers.some((p) => p.id === aId), 'A’s own goodbye');
    assert.deepEqual(heldFor(b.router, aId), []);
  });

  test('a snapshot from a peer never heard is not taken, nor one in another’s name', async () => {
    const cluster = 'snap-forged';
    const subjects = subjectsOf(cluster);
    const forged = JSON.stringify({
      g: 'rogue',
      p: [{ m: model, e: [[null, 'forged', replica, 4_000_000, 4_000_000, BLOCK, 0, null]] }],
    });
    let answered = 0;
    // The rogue answers every snapshot subject, the shared one of older versions included.
    for (const subject of [`kvroute.${cluster}.snapshot`, `kvroute.${cluster}.snapshot.>`]) {
      wire.subscribe(subject, {
        callback: (_err, msg) => {
          answered++;
          msg.respond(forged);
        },
      });
    }
    // 'elder' beats (so it is asked) but never answers: the rogue answers in its place.
    const beat = setInterval(
      () => wire.publish(subjects.heartbeat, JSON.stringify({ g: 'elder' })),
      50,
    );
    try {
      await wire.flush();
      const c = await join(cluster);
      assert.ok(answered >= 1, 'the rogue answered');
      assert.deepEqual(heldFor(c.router, 'rogue'), [], 'nothing of the rogue’s taken');
      assert.deepEqual(heldFor(c.router, 'elder'), []);
      assert.equal(c.router.snapshot().replicas[0]!.queuedPromptTokens, 0);
      assert.ok(c.sync!.stats().refused >= 1, 'the answer in elder’s place refused');
    } finally {
      clearInterval(beat);
    }
  });

  test('a peer’s snapshot gives its own entries only, not claims about others’', async () => {
    const cluster = 'snap-claims';
    const subjects = subjectsOf(cluster);
    const answer = JSON.stringify({
      g: 'elder',
      p: [
        {
          m: model,
          e: [
            [null, 'own', replica, 64, 64, BLOCK, 0, null],
            ['someone-else', 'theirs', replica, 4_000_000, 4_000_000, BLOCK, 0, null],
          ],
        },
      ],
    });
    for (const subject of [`kvroute.${cluster}.snapshot`, subjects.snapshot('elder')]) {
      wire.subscribe(subject, {
        callback: (_err, msg) => {
          msg.respond(answer);
        },
      });
    }
    const beat = setInterval(
      () => wire.publish(subjects.heartbeat, JSON.stringify({ g: 'elder' })),
      50,
    );
    try {
      await wire.flush();
      const c = await join(cluster);
      assert.deepEqual(heldFor(c.router, 'elder'), ['own']);
      assert.deepEqual(heldFor(c.router, 'someone-else'), [], 'a claim about another refused');
    } finally {
      clearInterval(beat);
    }
  });

  test('one peer’s entries stay within the bound: a flood of 10,000 keeps 1,000', async () => {
    const cluster = 'flood';
    const subjects = subjectsOf(cluster);
    const gw = await join(cluster, { limits: { maxEntriesPerPeer: 1_000 } });
    for (let m = 0; m < 20; m++) {
      const records = Array.from({ length: 500 }, (_, i) => route(`f-${m}-${i}`));
      wire.publish(subjects.route(model), JSON.stringify({ g: 'flooder', m: model, r: records }));
    }
    // And its whole set, 10,000 entries at once.
    const state = Array.from({ length: 10_000 }, (_, i) => [
      `s-${i}`,
      replica,
      32,
      32,
      BLOCK,
      0,
      null,
    ]);
    wire.publish(subjects.route(model), JSON.stringify({ g: 'flooder', m: model, s: state }));
    wire.publish(
      subjects.route(model),
      JSON.stringify({ g: 'sentinel', m: model, r: [route('z')] }),
    );
    await wire.flush();
    await waitFor(() => heldFor(gw.router, 'sentinel').length === 1, 'the message after the flood');
    assert.equal(heldFor(gw.router, 'flooder').length, 1_000);
    assert.ok(gw.router.inFlight().length <= 1_001);
    assert.ok(gw.sync!.stats().refused >= 18_000, 'the rest refused and counted');
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    const refused = /^kvroute_sync_dropped_total\{reason="refused"\} (\d+)/m.exec(metrics);
    assert.ok(refused && Number(refused[1]) >= 18_000, 'and in the metrics');
  });

  test('peers and message sizes are bounded', async () => {
    const cluster = 'many';
    const subjects = subjectsOf(cluster);
    const gw = await join(cluster, { limits: { maxPeers: 8, maxMessageBytes: 10_000 } });
    for (let i = 0; i < 100; i++) {
      wire.publish(subjects.heartbeat, JSON.stringify({ g: `fake-${i}` }));
    }
    const big = Array.from({ length: 400 }, (_, i) => route(`big-${i}`));
    wire.publish(subjects.route(model), JSON.stringify({ g: 'fake-0', m: model, r: big }));
    wire.publish(subjects.route(model), JSON.stringify({ g: 'fake-1', m: model, r: [route('z')] }));
    await wire.flush();
    await waitFor(() => heldFor(gw.router, 'fake-1').length === 1, 'the message after them');
    assert.equal(gw.sync!.stats().peers.length, 8, 'eight peers held, the rest refused');
    assert.deepEqual(heldFor(gw.router, 'fake-0'), [], 'the oversized message dropped unread');
    assert.ok(gw.sync!.stats().malformed >= 1);
  });
});

describe('engines found through NATS, against overwrites', { skip }, () => {
  let nats: NatsServer;
  let nc: NatsConnection;

  before(async () => {
    nats = await startNatsServer({ jetstream: true });
    nc = await connect({ servers: nats.url });
  });

  after(async () => {
    await nc?.close();
    await nats?.close();
  });

  const entry = (url: string) => JSON.stringify({ url, events: null, replay: null, model: null });

  test('an entry overwritten with an address outside the allow-list is not followed', async () => {
    const added: string[] = [];
    const removed: string[] = [];
    const refused: string[] = [];
    const follower = await followEngines(
      { url: nats.url, cluster: 'allow', policy: { allow: ['127.0.0.0/8'], maxBackends: 10 } },
      {
        onAdd: (e) => added.push(e.url),
        onRemove: (e) => removed.push(e.url),
        onRefuse: (key) => refused.push(key),
      },
    );
    try {
      const kv = await new Kvm(nc).open(bucketName('allow'));
      const real = 'http://127.0.0.1:8001';
      const attacker = 'http://10.66.0.1:8000';
      await kv.put(engineKey(real), entry(real));
      await waitFor(() => added.includes(real), 'the real engine');
      // The real engine's key overwritten with the attacker's address; and its own key.
      await kv.put(engineKey(real), entry(attacker));
      await kv.put(engineKey(attacker), entry(attacker));
      await kv.put(engineKey(attacker), entry('http://[fd00::1]:8000'));
      const next = 'http://127.0.0.2:8002';
      await kv.put(engineKey(next), entry(next));
      await waitFor(() => added.includes(next), 'the entry written after the overwrites');
      assert.deepEqual(added, [real, next], 'the attacker’s address never taken');
      assert.deepEqual(removed, [], 'the real engine kept');
      assert.equal(refused.length, 3);
    } finally {
      await follower.close();
    }
  });

  test('at most maxBackends engines are taken from discovery', async () => {
    const added: string[] = [];
    let refused = 0;
    const follower = await followEngines(
      { url: nats.url, cluster: 'max', policy: { allow: [], maxBackends: 2 } },
      { onAdd: (e) => added.push(e.url), onRemove: () => {}, onRefuse: () => refused++ },
    );
    try {
      const kv = await new Kvm(nc).open(bucketName('max'));
      for (let i = 0; i < 5; i++) {
        const url = `http://127.0.0.1:${9100 + i}`;
        await kv.put(engineKey(url), entry(url));
      }
      await waitFor(() => added.length + refused === 5, 'every entry read');
      assert.equal(added.length, 2);
    } finally {
      await follower.close();
    }
  });
});
