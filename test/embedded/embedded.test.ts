/**
 * The embedded fleet: `kvroute serve` with no backend starts simulated engines in-process and
 * routes to them; closing the gateway stops them. The gateway alone needs backends.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startGatewayWithFleet } from '../../src/embedded/gateway.ts';
import { startEmbeddedFleet } from '../../src/embedded/fleet.ts';
import { defaultConfig } from '../../src/serving/config.ts';
import { startGateway } from '../../src/gateway/gateway.ts';
import { complete } from '../support/gateway.harness.ts';

test('no backend: an embedded fleet serves, with its events, and closes with the gateway', async () => {
  const gw = await startGatewayWithFleet(
    { ...defaultConfig(), port: 0, embeddedReplicas: 2, exposeReplicaAddresses: true },
    { embeddedSpeedup: 50 },
  );
  let urls: string[] = [];
  try {
    assert.equal(gw.replicas.length, 2);
    urls = gw.replicas.map((r) => r.url);
    for (const r of gw.replicas) {
      assert.equal(r.embedded, true);
      assert.match(r.events ?? '', /^tcp:\/\/127\.0\.0\.1:\d+$/);
      assert.match(r.replay ?? '', /^tcp:\/\/127\.0\.0\.1:\d+$/);
    }
    const r = await complete(gw.url, { prompt: 'hello', max_tokens: 2 });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json?.usage?.prompt_tokens, 1);
    assert.ok(r.replica && gw.replicas.some((x) => x.name === r.replica));
  } finally {
    await gw.close();
  }
  for (const url of urls) {
    await assert.rejects(fetch(`${url}/health`), 'the engine stopped with the gateway');
  }
});

test('configured backends: no fleet is started', async () => {
  const fleet = await startEmbeddedFleet({
    replicas: 1,
    speedup: 50,
    engine: { servedModelName: 'tiny', kvBlocks: 64 },
  });
  try {
    assert.equal(fleet.backends[0]!.model, 'tiny');
    const gw = await startGatewayWithFleet({
      ...defaultConfig(),
      port: 0,
      backends: fleet.backends,
    });
    try {
      assert.deepEqual(
        gw.replicas.map((r) => [r.url, r.embedded]),
        [[fleet.engines[0]!.url, false]],
      );
    } finally {
      await gw.close();
    }
    assert.equal((await fetch(`${fleet.engines[0]!.url}/health`)).status, 200);
  } finally {
    await fleet.close();
  }
});

test('the gateway alone refuses to start without a backend', async () => {
  await assert.rejects(startGateway({ ...defaultConfig(), port: 0 }), {
    name: 'GatewayError',
    code: 'ERR_CONFIG',
    message: /no backend configured/,
  });
});
