/**
 * The dashboard without a browser: series points from two samples, the feed's history, the page
 * and uPlot served from this process, and the event stream's first message, which needs the
 * admin key once the gateway has one (as /router/replicas does) and carries the traffic sent
 * before anyone looked.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { DashboardFeed, HISTORY_POINTS } from '../../src/gateway/dashboard/feed.ts';
import {
  type DashboardPoint,
  type DashboardSample,
  pointBetween,
} from '../../src/gateway/dashboard/state.ts';
import { DEFAULT_POLICY } from '../../src/router/defaults.ts';
import {
  complete,
  type EngineServerHandle,
  type GatewayHandle,
  startEngines,
  startGatewayFor,
  tokens,
} from '../support/gateway.harness.ts';

const row = (name: string, cachedTokens: number, uncachedTokens: number, queued = 0) => ({
  name,
  healthy: true,
  verdict: 'eligible',
  kvUsage: 0.5,
  queuedPromptTokens: queued,
  running: 1,
  waiting: 0,
  inFlight: 1,
  indexedBlocks: 10,
  decisions: 1,
  cachedTokens,
  uncachedTokens,
  spills: 0,
});

describe('pointBetween', () => {
  test('rates and hit rate over the interval, queues as they are now', () => {
    const a: DashboardSample = {
      atMs: 10_000,
      replicas: [row('r0', 100, 100), row('r1', 0, 0)],
      decisionsByPolicy: { cost: 10 },
      ttftP50Ms: null,
      ttftP99Ms: null,
    };
    const b: DashboardSample = {
      atMs: 12_000,
      replicas: [row('r0', 400, 200, 64), row('r1', 0, 100)],
      decisionsByPolicy: { cost: 30 },
      ttftP50Ms: 12,
      ttftP99Ms: 40,
    };
    const p = pointBetween(a, b);
    assert.deepEqual(p.decisionsPerS, { cost: 10 });
    assert.equal(p.hitRate, 300 / 500);
    assert.deepEqual(p.queuedPromptTokens, { r0: 64, r1: 0 });
    assert.equal(p.ttftP99Ms, 40);
    const first = pointBetween(null, a);
    assert.deepEqual(first.decisionsPerS, { cost: 0 });
    assert.equal(first.hitRate, null);
    assert.equal(pointBetween(b, b).hitRate, null, 'nothing routed: no hit rate');
    const none: DashboardSample = { ...a, atMs: 8_000, decisionsByPolicy: {} };
    assert.deepEqual(
      pointBetween(none, a).decisionsPerS,
      { cost: 5 },
      'a policy first seen in this sample made its decisions in the interval',
    );
  });
});

describe('DashboardFeed', () => {
  test('a new stream gets every point kept, at most HISTORY_POINTS, the oldest dropped', async (t) => {
    // The feed's own timer stays still: on a busy machine it could add a sample mid-test.
    t.mock.timers.enable({ apis: ['setInterval'] });
    let decisions = 0;
    const feed = new DashboardFeed(() => ({
      atMs: 1_000 * (decisions + 1),
      replicas: [row('r0', 0, 0)],
      decisionsByPolicy: { cost: decisions++ },
      ttftP50Ms: null,
      ttftP99Ms: null,
    }));
    feed.start();
    feed.start();
    assert.equal(feed.points, 1, 'start samples once, and only once');
    for (let i = 0; i < HISTORY_POINTS + 9; i++) feed.tick();
    assert.equal(feed.points, HISTORY_POINTS);
    const server = createServer((_req, res) => feed.subscribe(res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const message = await firstMessage(`http://127.0.0.1:${port}/`);
      assert.equal(message.points.length, HISTORY_POINTS);
      // Ten samples taken; the first point kept is the 11th (one decision a second throughout).
      assert.equal(message.points[0].atMs, 11_000);
      assert.deepEqual(message.points.at(-1).decisionsPerS, { cost: 1 });
      // The stream's sample is taken as it opens (one more than the points'), adding no point.
      assert.equal(message.sample.decisionsByPolicy.cost, HISTORY_POINTS + 10);
      assert.equal(feed.points, HISTORY_POINTS);
    } finally {
      feed.close();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

/** Decisions the points account for: each point's rate over the interval since the one before. */
function decisionsIn(points: DashboardPoint[]): number {
  let total = 0;
  for (let i = 1; i < points.length; i++) {
    const seconds = Math.max(1e-3, (points[i]!.atMs - points[i - 1]!.atMs) / 1000);
    for (const rate of Object.values(points[i]!.decisionsPerS)) total += rate * seconds;
  }
  return Math.round(total);
}

/** The first SSE message of `url`, parsed. */
async function firstMessage(url: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { headers });
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
  const reader = res.body!.getReader();
  let text = '';
  while (!text.includes('\n\n')) {
    const { value, done } = await reader.read();
    if (done) break;
    text += Buffer.from(value).toString('utf8');
  }
  await reader.cancel();
  return JSON.parse(text.slice('data: '.length, text.indexOf('\n\n')));
}

describe('the dashboard over HTTP', () => {
  let engines: EngineServerHandle[];
  let gw: GatewayHandle;
  before(async () => {
    engines = await startEngines(2, { speedup: 50 });
    gw = await startGatewayFor(engines, { adminKey: 'sk-admin' });
  });
  after(async () => {
    await gw.close();
    await Promise.all(engines.map((e) => e.close()));
  });

  test('the page, its script and uPlot are served from here', async () => {
    const page = await fetch(`${gw.url}/`);
    assert.equal(page.status, 200);
    const html = await page.text();
    assert.match(html, /<title>kvroute<\/title>/);
    assert.doesNotMatch(html, /https?:\/\//, 'nothing is fetched from elsewhere');
    for (const path of [
      '/dashboard/app.js',
      '/dashboard/uPlot.iife.min.js',
      '/dashboard/uPlot.min.css',
    ]) {
      const res = await fetch(`${gw.url}${path}`);
      assert.equal(res.status, 200, path);
      assert.ok((await res.text()).length > 100, path);
    }
  });

  test('the stream needs the admin key, then sends the fleet and the series', async () => {
    assert.equal((await fetch(`${gw.url}/dashboard/events`)).status, 401);
    const r = await complete(gw.url, { prompt: tokens(1, 64), max_tokens: 2 });
    assert.equal(r.status, 200);
    const message = await firstMessage(`${gw.url}/dashboard/events`, {
      authorization: 'Bearer sk-admin',
    });
    assert.equal(message.sample.replicas.length, 2);
    assert.deepEqual(message.sample.decisionsByPolicy, { [DEFAULT_POLICY]: 1 });
    const served = message.sample.replicas.find((x: { name: string }) => x.name === r.replica);
    assert.equal(served.decisions, 1);
    assert.equal(served.uncachedTokens + served.cachedTokens, 64);
    assert.ok(message.points.length >= 1);
  });
});

describe('the dashboard opens on the last minutes', () => {
  let engines: EngineServerHandle[];
  let gw: GatewayHandle;
  before(async () => {
    engines = await startEngines(2, { speedup: 50 });
    gw = await startGatewayFor(engines);
  });
  after(async () => {
    await gw.close();
    await Promise.all(engines.map((e) => e.close()));
  });

  test('traffic sent before anyone looked is in the first message of a stream', async () => {
    const sent = 6;
    for (let i = 0; i < sent; i++) {
      const r = await complete(gw.url, { prompt: tokens(10 + i, 64), max_tokens: 2 });
      assert.equal(r.status, 200);
    }
    // The gateway samples once a second from its start: poll new streams (bounded) until one
    // opens after the sample that follows the last request. A feed that began sampling only
    // when the first stream opened would never account for these requests.
    let message: { sample: DashboardSample; points: DashboardPoint[] } | null = null;
    for (let attempt = 0; attempt < 120; attempt++) {
      message = await firstMessage(`${gw.url}/dashboard/events`);
      if (decisionsIn(message!.points) >= sent) break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    assert.ok(message);
    assert.equal(decisionsIn(message.points), sent);
    assert.equal(message.sample.decisionsByPolicy[DEFAULT_POLICY], sent);
    assert.ok(message.points.length >= 2);
    assert.ok(
      message.points.some((p) => p.hitRate !== null),
      'the routed prompt tokens are in the series',
    );
    for (let i = 1; i < message.points.length; i++) {
      assert.ok(message.points[i]!.atMs >= message.points[i - 1]!.atMs, 'points in time order');
    }
  });
});
