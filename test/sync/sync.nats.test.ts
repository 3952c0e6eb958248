/**
 * Gateways sharing routing state over a real `nats-server` (started here on a free loopback
 * port): a decision of one raises the other's ledger and its release lowers it; a late joiner
 * takes a peer's snapshot; a peer that stops beating has its entries dropped; NATS going away
 * fails no request, and the gateways resynchronise when it is back.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import OpenAI from 'openai';
import { computeBlockKeys } from '../../src/kv/blockKey.ts';
import type { PoolRoute } from '../../src/serving/pool.ts';
import type { Router } from '../../src/router/index.ts';
import { subjectsOf } from '../../src/sync/subjects.ts';
import type { SyncConfig } from '../../src/sync/stateSync.ts';
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

/** Queued prompt tokens and in-flight requests per replica name, as a router counts them. */
function load(router: Router): Record<string, [number, number]> {
  return Object.fromEntries(
    router.snapshot().replicas.map((r) => [r.name, [r.queuedPromptTokens, r.inFlight]]),
  );
}

const totalInFlight = (router: Router): number =>
  router.snapshot().replicas.reduce((s, r) => s + r.inFlight, 0);

describe('state shared over NATS', { skip }, () => {
  let nats: NatsServer;
  let engines: EngineServerHandle[];
  const gateways: GatewayHandle[] = [];
  let sync: SyncConfig;

  const startGateway = async (): Promise<GatewayHandle> => {
    const gw = await startGatewayFor(engines, { nats: sync });
    gateways.push(gw);
    await gw.sync!.ready;
    return gw;
  };

  /** Routes a request on `gw`'s pool directly (the ModelPool contract): it stays in flight. */
  const routeOn = (gw: GatewayHandle, seed: number, promptTokens = 800): PoolRoute => {
    const prompt = tokens(seed, promptTokens);
    return gw.pools.first!.route(
      {
        id: `t-${seed}`,
        blockKeys: computeBlockKeys(prompt, BLOCK),
        promptTokens,
        blockSize: BLOCK,
      },
      Date.now(),
    );
  };

  before(async () => {
    nats = await startNatsServer();
    sync = {
      url: nats.url,
      cluster: 'test',
      heartbeatMs: 200,
      peerTimeoutMs: 1_500,
      stateEveryMs: 60_000,
    };
    engines = await startEngines(2, { speedup: 50 });
  });

  after(async () => {
    for (const gw of gateways) await gw.close();
    for (const e of engines) await e.close();
    await nats.close();
  });

  test('a decision on A raises B’s ledger; its first token and its end lower it', async () => {
    const a = await startGateway();
    const b = await startGateway();
    const route = routeOn(a, 1);
    const replica = route.decision.replica;
    await waitFor(() => load(b.router)[replica]?.[0] === 800, 'B to count A’s queued tokens');
    assert.deepEqual(b.router.peers(), [a.sync!.id]);
    const state = (await (await fetch(`${b.url}/router/replicas`)).json()) as {
      sync: { id: string; connected: boolean; peers: { id: string }[] };
    };
    assert.equal(state.sync.id, b.sync!.id);
    assert.equal(state.sync.connected, true);
    assert.deepEqual(
      state.sync.peers.map((p) => p.id),
      [a.sync!.id],
    );
    a.pools.first!.firstToken(route, Date.now());
    await waitFor(
      () => load(b.router)[replica]?.[0] === 0 && load(b.router)[replica]?.[1] === 1,
      'B to see the prefill end',
    );
    a.pools.first!.finish(route, Date.now());
    await waitFor(() => totalInFlight(b.router) === 0, 'B to see the request end');

    // And over HTTP: a streamed completion through B ends with nothing left in A's ledger.
    const client = new OpenAI({ baseURL: `${b.url}/v1`, apiKey: 'none', maxRetries: 0 });
    const stream = await client.completions.create({
      model: engines[0]!.servedModelName,
      prompt: tokens(2, 300),
      max_tokens: 4,
      stream: true,
    });
    let chunks = 0;
    for await (const _ of stream) chunks++;
    assert.ok(chunks > 0);
    // A applied B's route, its first token and its end (3 records), and holds nothing.
    await waitFor(() => a.sync!.stats().applied === 3, 'A to apply B’s records');
    assert.equal(totalInFlight(a.router), 0);
  });

  test('a late joiner takes a peer’s snapshot: its own and its peers’ entries', async () => {
    const [a, b] = gateways as [GatewayHandle, GatewayHandle];
    const onA = routeOn(a, 10, 1_600);
    const onB = routeOn(b, 11, 480);
    await waitFor(
      () => totalInFlight(a.router) === 2 && totalInFlight(b.router) === 2,
      'A and B to agree',
    );
    const c = await startGateway();
    // ready resolved after the snapshot: both entries are there, under their owners' ids.
    const seen = c.router
      .inFlight()
      .map((r) => [r.peer, r.requestId, r.uncachedTokens])
      .sort();
    assert.deepEqual(
      seen,
      [
        [a.sync!.id, 't-10', onA.decision.uncachedTokens],
        [b.sync!.id, 't-11', onB.decision.uncachedTokens],
      ].sort(),
    );
    a.pools.first!.finish(onA, Date.now());
    b.pools.first!.finish(onB, Date.now());
    await waitFor(() => totalInFlight(c.router) === 0, 'C to see both end');
    await c.close();
    await waitFor(() => !a.router.peers().includes(c.sync!.id), 'C’s goodbye');
  });

  test('a peer that stops beating has its entries dropped within the timeout', async () => {
    const [a, b] = gateways as [GatewayHandle, GatewayHandle];
    const replica = a.router.snapshot().replicas[0]!.name;
    // A peer as the wire sees it: a decision, heartbeats, then nothing (killed, no goodbye).
    const ghost: NatsConnection = await connect({ servers: nats.url });
    const subjects = subjectsOf('test');
    const model = a.pools.first!.model;
    ghost.publish(
      subjects.route(model),
      JSON.stringify({
        g: 'ghost',
        m: model,
        r: [['r', 'g-1', replica, 4_000, 4_000, BLOCK, 0, [], null]],
      }),
    );
    ghost.publish(subjects.heartbeat, JSON.stringify({ g: 'ghost' }));
    await ghost.flush();
    await waitFor(
      () => load(a.router)[replica]?.[0] === 4_000 && load(b.router)[replica]?.[0] === 4_000,
      'the ghost’s queue on A and B',
    );
    // The ghost hears its own beats back from the server, as A and B hear them. 20 beats at
    // least 100 ms apart (a timer never fires early) span more than the 1.5 s peer timeout.
    let echoed = 0;
    const echo = ghost.subscribe(subjects.heartbeat, {
      callback: (_err, msg) => {
        if ((JSON.parse(msg.string()) as { g?: string }).g === 'ghost') echoed++;
      },
    });
    await ghost.flush();
    const beats = setInterval(
      () => ghost.publish(subjects.heartbeat, JSON.stringify({ g: 'ghost' })),
      100,
    );
    await waitFor(() => echoed >= 20, '20 of the ghost’s heartbeats', 30_000);
    assert.equal(load(a.router)[replica]?.[0], 4_000, 'kept while it beats');
    assert.equal(load(b.router)[replica]?.[0], 4_000, 'kept while it beats');
    clearInterval(beats);
    echo.unsubscribe();
    await ghost.close();
    // Gone without a goodbye: not dropped when its connection closes, only at the timeout.
    assert.equal(load(a.router)[replica]?.[0], 4_000, 'not before the timeout');
    assert.ok(a.router.peers().includes('ghost'));
    await waitFor(
      () => load(a.router)[replica]?.[0] === 0 && load(b.router)[replica]?.[0] === 0,
      'the ghost’s entries to go',
      30_000,
    );
    assert.ok(!a.router.peers().includes('ghost'));
  });

  test('NATS stopped mid-run: no request fails; on reconnect the peers resynchronise', async () => {
    const [a, b] = gateways as [GatewayHandle, GatewayHandle];
    const clients = [a, b].map(
      (gw) => new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'none', maxRetries: 0 }),
    );
    let stop = false;
    const failures: unknown[] = [];
    let done = 0;
    const load$ = (async () => {
      for (let i = 0; !stop; i++) {
        try {
          await clients[i % 2]!.completions.create({
            model: engines[0]!.servedModelName,
            prompt: tokens(100 + i, 200),
            max_tokens: 3,
          });
          done++;
        } catch (err) {
          failures.push(err);
        }
      }
    })();
    await waitFor(() => done >= 3, 'requests before the outage');
    await nats.stop();
    await waitFor(() => !a.sync!.stats().connected && !b.sync!.stats().connected, 'both to notice');
    // During the outage A routes a request; B cannot know of it yet.
    const during = routeOn(a, 20, 960);
    const before = done;
    await waitFor(() => done >= before + 4, 'requests during the outage');
    await nats.start();
    await waitFor(
      () => a.sync!.stats().connected && b.sync!.stats().connected,
      'both to reconnect',
      30_000,
    );
    await waitFor(
      () => b.router.inFlight().some((r) => r.peer === a.sync!.id && r.requestId === 't-20'),
      'B to learn A’s request routed during the outage',
    );
    const after = done;
    await waitFor(() => done >= after + 3, 'requests after the outage');
    stop = true;
    await load$;
    assert.deepEqual(failures, []);
    a.pools.first!.finish(during, Date.now());
    // A release published while the client was reconnecting can be lost; the owner's next state
    // broadcast mends it (`stateEveryMs`), so the hang guard covers two of its periods.
    await waitFor(
      () => totalInFlight(b.router) === 0 && totalInFlight(a.router) === 0,
      'both ledgers empty',
      2 * sync.stateEveryMs,
    );
  });
});
