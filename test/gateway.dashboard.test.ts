/**
 * The dashboard without a browser: series points from two samples, the page and uPlot served
 * from this process, and the event stream's first message, which needs the admin key once the
 * gateway has one (as /router/replicas does).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type DashboardSample, pointBetween } from '../src/gateway/dashboard/state.ts';
import { DEFAULT_POLICY } from '../src/router/defaults.ts';
import {
  complete,
  type EngineServerHandle,
  type GatewayHandle,
  startEngines,
  startGatewayFor,
  tokens,
} from './gateway.harness.ts';

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
  });
});

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
