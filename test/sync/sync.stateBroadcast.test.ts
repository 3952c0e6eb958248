/**
 * The NATS sync's periodic state broadcast (`stateEveryMs`, short here; the other sync tests set
 * it to a minute) mends a peer's view that lost a record on the way, and malformed messages on
 * each subject are dropped whole and counted, one each: route and heartbeat messages, and the
 * snapshot a late joiner takes from a peer.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { computeBlockKeys } from '../../src/kv/blockKey.ts';
import type { Router } from '../../src/router/index.ts';
import { subjectsOf } from '../../src/sync/subjects.ts';
import {
  type EngineServerHandle,
  type GatewayHandle,
  startEngines,
  startGatewayFor,
  tokens,
  waitFor,
} from '../support/gateway.harness.ts';
import { type NatsServer, natsServerInstalled, startNatsServer } from '../support/natsServer.ts';

const skip = natsServerInstalled()
  ? false
  : 'nats-server is not installed (apt-get install nats-server)';
const BLOCK = 16;
const CLUSTER = 'broadcast';

/** Requests in flight on `router` held for peer `peer`, by request id. */
const heldFor = (router: Router, peer: string): string[] =>
  router
    .inFlight()
    .filter((r) => r.peer === peer)
    .map((r) => r.requestId)
    .sort();

describe('the periodic state broadcast', { skip }, () => {
  let nats: NatsServer;
  let engines: EngineServerHandle[];
  let a: GatewayHandle;
  let b: GatewayHandle;
  let wire: NatsConnection;

  before(async () => {
    nats = await startNatsServer();
    engines = await startEngines(1, { speedup: 50 });
    const sync = {
      url: nats.url,
      cluster: CLUSTER,
      heartbeatMs: 200,
      peerTimeoutMs: 60_000,
      stateEveryMs: 300,
    };
    a = await startGatewayFor(engines, { nats: sync });
    await a.sync!.ready;
    b = await startGatewayFor(engines, { nats: { ...sync, stateEveryMs: 60_000 } });
    await b.sync!.ready;
    wire = await connect({ servers: nats.url });
  });

  after(async () => {
    await wire?.close();
    await b?.close();
    await a?.close();
    for (const e of engines) await e.close();
    await nats?.close();
  });

  test("a record lost on the way is mended by the owner's next state", async () => {
    const prompt = tokens(5, 400);
    const route = a.pools.first!.route(
      {
        id: 'kept',
        blockKeys: computeBlockKeys(prompt, BLOCK),
        promptTokens: 400,
        blockSize: BLOCK,
      },
      Date.now(),
    );
    const aId = a.sync!.id;
    await waitFor(() => heldFor(b.router, aId).includes('kept'), 'B to hold A’s request');
    // B's view goes wrong as if A's release of 'kept' had been delivered and a decision of a
    // request A never had had arrived: a forged record in A's name (NATS core: at most once, so
    // a view that drifts is what the broadcast is for).
    const subjects = subjectsOf(CLUSTER);
    const model = a.pools.first!.model;
    const replica = route.decision.replica;
    // What B holds of A the moment it has applied the forged route: A's next state (300 ms
    // later at most) mends it, so a poll on a busy host may never see the forged view.
    const forgedView: string[] = [];
    const apply = b.router.applyPeerRoute.bind(b.router);
    b.router.applyPeerRoute = (record, nowMs) => {
      const applied = apply(record, nowMs);
      if (record.requestId === 'phantom') forgedView.push(heldFor(b.router, aId).join());
      return applied;
    };
    try {
      wire.publish(
        subjects.route(model),
        JSON.stringify({
          g: aId,
          m: model,
          r: [
            ['d', 'kept'],
            ['r', 'phantom', replica, 4_000, 4_000, BLOCK, 0, [], null],
          ],
        }),
      );
      await wire.flush();
      await waitFor(() => forgedView.length > 0, 'the forged records on B');
    } finally {
      b.router.applyPeerRoute = apply;
    }
    assert.equal(forgedView[0], 'phantom', 'the release applied, then the route A never had');
    // A's own state, published every 300 ms, replaces what B holds of A: 'kept' back, no phantom.
    await waitFor(
      () => heldFor(b.router, aId).join() === 'kept',
      'A’s periodic state to mend B',
      30_000,
    );
    a.pools.first!.finish(route, Date.now());
    await waitFor(() => heldFor(b.router, aId).length === 0, 'the release');
  });

  test('malformed messages on the route and heartbeat subjects are dropped and counted', async () => {
    const subjects = subjectsOf(CLUSTER);
    const model = a.pools.first!.model;
    const before = b.sync!.stats().malformed;
    const appliedBefore = b.sync!.stats().applied;
    const bad = [
      [subjects.route(model), 'not json'],
      [subjects.route(model), JSON.stringify([1, 2, 3])],
      [subjects.route(model), JSON.stringify({ g: 'x', m: model, r: [['r', 'id']] })],
      [subjects.route(model), JSON.stringify({ g: 'x', m: model, r: [['f', 'ok'], ['zz']] })],
      [subjects.route(model), JSON.stringify({ g: 'x', m: model, s: [{ nope: 1 }] })],
      [subjects.heartbeat, 'not json'],
      [subjects.heartbeat, JSON.stringify({ sender: 'x' })],
    ] as const;
    for (const [subject, data] of bad) wire.publish(subject, data);
    // Then a valid heartbeat of a new peer: B has read everything before it once it knows it.
    wire.publish(subjects.heartbeat, JSON.stringify({ g: 'late-peer' }));
    await wire.flush();
    const peers = () => b.sync!.stats().peers.map((p) => p.id);
    await waitFor(() => peers().includes('late-peer'), 'the valid heartbeat after them');
    assert.equal(b.sync!.stats().malformed - before, bad.length, 'one count per message');
    assert.equal(b.sync!.stats().applied, appliedBefore, 'nothing of them applied');
    // Whole messages are dropped: the valid 'f' record beside a bad one did nothing either.
    assert.ok(!peers().includes('x'), 'a malformed message does not even make its sender known');
  });
});

describe('the snapshot a late joiner takes', { skip }, () => {
  let nats: NatsServer;
  let engines: EngineServerHandle[];
  let wire: NatsConnection;
  const gateways: GatewayHandle[] = [];
  /** The pool's model and its replica's name, as the gateway names them. */
  let model: string | null;
  let replica: string;

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

  /**
   * A gateway joining cluster `cluster`, where the one to answer its snapshot request is this
   * test as peer 'elder' (beating, on its own snapshot subject), with `reply`. Its `ready` resolves once it has taken (or refused) the answer.
   */
  const joinWith = async (cluster: string, reply: string): Promise<GatewayHandle> => {
    let answered = false;
    // 'elder' beats first: a joiner asks only peers it has heard, each on its own subject.
    const beat = setInterval(
      () => wire.publish(subjectsOf(cluster).heartbeat, JSON.stringify({ g: 'elder' })),
      50,
    );
    wire.subscribe(subjectsOf(cluster).snapshot('elder'), {
      max: 1,
      callback: (_err, msg) => {
        answered = msg.respond(reply);
      },
    });
    await wire.flush();
    const gw = await startGatewayFor(engines, {
      nats: {
        url: nats.url,
        cluster,
        heartbeatMs: 200,
        peerTimeoutMs: 60_000,
        stateEveryMs: 60_000,
      },
    });
    gateways.push(gw);
    await gw.sync!.ready;
    clearInterval(beat);
    assert.ok(answered, 'the snapshot request was answered');
    return gw;
  };
  /** A snapshot of peer 'elder' holding one request: [peer, id, replica, prompt, uncached, block, decoding, lora]. */
  const snapshot = (uncachedTokens: number): string =>
    JSON.stringify({
      g: 'elder',
      p: [{ m: model, e: [[null, 'held', replica, 400, uncachedTokens, BLOCK, 0, null]] }],
    });

  test('a valid one is applied, under its sender', async () => {
    const gw = await joinWith('snapshot-valid', snapshot(400));
    assert.deepEqual(heldFor(gw.router, 'elder'), ['held']);
    assert.equal(gw.sync!.stats().malformed, 0);
    assert.ok(
      gw.sync!.stats().peers.some((p) => p.id === 'elder'),
      'its sender is a peer',
    );
  });

  test('a malformed one is dropped whole and counted once', async () => {
    // The same snapshot, one field off: more uncached tokens (401) than prompt tokens (400).
    const gw = await joinWith('snapshot-bad', snapshot(401));
    assert.equal(gw.sync!.stats().malformed, 1);
    assert.deepEqual(heldFor(gw.router, 'elder'), [], 'nothing of it applied');
    // 'elder' is a peer (it beats: that is why it was asked), holding nothing of its answer.
  });
});
