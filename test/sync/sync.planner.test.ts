/**
 * `--planner` with several routers: a gateway (`kvroute serve --nats --planner`) and an endpoint
 * picker (`kvroute epp --nats --planner`, behind a data plane playing Envoy) of one cluster over
 * the same two simulated engines, each sent half of the traffic by the `openai` client. Each
 * planner's window holds both halves (shared over NATS), each searches them, and both export the
 * same count: the highest of their own and their peer's. A forger's malformed message is
 * counted and changes nothing. Needs Debian's nats-server.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { connect } from '@nats-io/transport-node';
import OpenAI from 'openai';
import { type EppHandle, startEpp } from '../../src/epp/server.ts';
import { startGateway } from '../../src/gateway/gateway.ts';
import { defaultPlannerConfig } from '../../src/serving/planner.ts';
import type { SyncConfig } from '../../src/sync/stateSync.ts';
import { subjectsOf } from '../../src/sync/subjects.ts';
import { type EppProxy, startEppProxy } from '../support/eppProxy.ts';
import {
  configFor,
  type EngineServerHandle,
  type GatewayHandle,
  startEngines,
  tokens,
  waitFor,
} from '../support/gateway.harness.ts';
import { type NatsServer, natsServerInstalled, startNatsServer } from '../support/natsServer.ts';

const skip = natsServerInstalled()
  ? false
  : 'nats-server is not installed (apt-get install nats-server)';
const EACH = 6;
const CLUSTER = 'planner-test';
const HANG_GUARD_MS = 120_000;

interface Desired {
  pool: string;
  desiredReplicas: number;
  ownReplicas: number;
  peers: { peer: string; desiredReplicas: number }[];
  fit: { requests: number };
}

describe('--planner with a gateway and a picker sharing over NATS', { skip }, () => {
  let nats: NatsServer;
  let engines: EngineServerHandle[] = [];
  let gw: GatewayHandle;
  let epp: EppHandle;
  let proxy: EppProxy;
  let model: string;

  before(async () => {
    nats = await startNatsServer();
    const sync: SyncConfig = {
      url: nats.url,
      cluster: CLUSTER,
      heartbeatMs: 200,
      peerTimeoutMs: 600_000,
      stateEveryMs: 60_000,
    };
    engines = await startEngines(2, { speedup: 100 });
    model = engines[0]!.servedModelName;
    // An interval far past the test: the rounds run when the test asks.
    const planner = { ...defaultPlannerConfig(), intervalS: 3_600, maxReplicas: 8 };
    gw = await startGateway(configFor(engines, { nats: sync, planner }));
    epp = await startEpp(configFor(engines, { nats: sync, planner }), {
      host: '127.0.0.1',
      port: 0,
      healthPort: null,
      metricsPort: 0,
    });
    await Promise.all([gw.sync!.ready, epp.sync!.ready]);
    proxy = await startEppProxy(epp.address);
  });
  after(async () => {
    await proxy?.close();
    await epp?.close();
    await gw?.close();
    for (const e of engines) await e.close();
    await nats?.close();
  });

  test('each planner searches both halves of the traffic; both export the same count', async () => {
    await waitFor(
      () => gw.sync!.stats().peers.length === 1 && epp.sync!.stats().peers.length === 1,
      'the gateway and the picker to hear each other',
      HANG_GUARD_MS,
    );
    const system = tokens(9, 1_024);
    for (const [i, url] of [gw.url, proxy.url].entries()) {
      const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
      for (let j = 0; j < EACH; j++) {
        const answer = await client.completions.create({
          model,
          prompt: [...system, ...tokens(100 * i + j, 200)],
          max_tokens: 4,
        });
        assert.equal(answer.usage?.completion_tokens, 4);
      }
    }
    await waitFor(
      () =>
        gw.planner!.fitOf(model)?.requests === 2 * EACH &&
        epp.planner!.fitOf(model)?.requests === 2 * EACH,
      'both windows to hold every request',
      HANG_GUARD_MS,
    );
    await gw.planner!.tick(Date.now());
    // The gateway's count reaches the picker before its round.
    await waitFor(
      () => epp.planner!.answers()[0]?.peers.length === 1,
      "the gateway's count at the picker",
      HANG_GUARD_MS,
    );
    await epp.planner!.tick(Date.now());
    await waitFor(
      () => gw.planner!.answers()[0]?.peers.length === 1,
      "the picker's count at the gateway",
      HANG_GUARD_MS,
    );
    const fromGw = (await (await fetch(`${gw.url}/planner/desired`)).json()) as Desired;
    const eppUrl = `http://127.0.0.1:${epp.metricsPort}`;
    const fromEpp = (await (await fetch(`${eppUrl}/planner/desired`)).json()) as Desired;
    for (const d of [fromGw, fromEpp]) {
      assert.equal(d.pool, model);
      assert.equal(d.fit.requests, 2 * EACH, 'the window of the whole cluster');
      assert.ok(d.ownReplicas >= 1 && d.ownReplicas <= 8, `${d.ownReplicas}`);
      assert.equal(d.peers.length, 1);
      assert.equal(d.desiredReplicas, Math.max(d.ownReplicas, d.peers[0]!.desiredReplicas));
    }
    assert.equal(fromGw.peers[0]!.desiredReplicas, fromEpp.ownReplicas);
    assert.equal(fromEpp.peers[0]!.desiredReplicas, fromGw.ownReplicas);
    assert.equal(fromGw.desiredReplicas, fromEpp.desiredReplicas, 'one count, whichever is asked');
    // A forger on the planner subject: a request without a prompt, a count past the bound.
    const forger = await connect({ servers: nats.url });
    const before = gw.sync!.stats().malformed;
    for (const bad of [
      { g: 'forger', p: model, o: [[0, 0, 1, []]], d: 3 },
      { g: 'forger', p: model, o: [], d: 1_000_000 },
    ]) {
      forger.publish(subjectsOf(CLUSTER).planner(model), JSON.stringify(bad));
    }
    await forger.flush();
    await forger.close();
    await waitFor(
      () => gw.sync!.stats().malformed === before + 2,
      'the forged messages counted',
      HANG_GUARD_MS,
    );
    assert.equal(gw.planner!.fitOf(model)?.requests, 2 * EACH);
    assert.equal(gw.planner!.answers()[0]!.peers.length, 1, 'no forged count');
    for (const url of [gw.url, eppUrl]) {
      const metrics = await (await fetch(`${url}/metrics`)).text();
      assert.match(
        metrics,
        new RegExp(
          `kvroute_planner_desired_replicas\\{pool="[^"]+"\\} ${fromGw.desiredReplicas}\\n`,
        ),
      );
    }
  });
});
