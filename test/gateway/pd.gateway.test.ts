/**
 * Live: two prefill and two decode simulated engines (vLLM's NixlConnector protocol) behind one
 * gateway. Each chat is prefilled on the prefill pool (one token generated there) and decoded
 * on the decode pool (every token of the answer); a repeated system prompt is a prefill-pool
 * cache hit; a short prompt takes the local path; killing a prefill engine under load loses no
 * request; the gateway's ledger and the prefillers' held blocks return to zero.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { backendOf } from '../../src/embedded/fleet.ts';
import { parseKvTransferConfig } from '../../src/engine/connector/kvTransferConfig.ts';
import type { BackendRole } from '../../src/serving/pdRoles.ts';
import {
  type EngineServerHandle,
  type GatewayHandle,
  replicas,
  startEngine,
  startGatewayFor,
  waitFor,
} from '../support/gateway.harness.ts';

const nixl = parseKvTransferConfig('{"kv_connector":"NixlConnector","kv_role":"kv_both"}');
// The fleet's engines share a transfer secret: without one their side channel is closed.
const ENGINE = {
  servedModelName: 'm',
  speedup: 200,
  kvTransferConfig: nixl,
  kvTransferSecret: 'pd-fleet-secret',
  maxModelLen: 16_384,
};

const prefill: EngineServerHandle[] = [];
const decode: EngineServerHandle[] = [];
const opened: GatewayHandle[] = [];

before(async () => {
  for (let i = 0; i < 2; i++) prefill.push(await startEngine({ ...ENGINE, seed: i }));
  for (let i = 0; i < 2; i++) decode.push(await startEngine({ ...ENGINE, seed: 10 + i }));
});

after(async () => {
  for (const gw of opened) await gw.close();
  for (const e of [...prefill, ...decode]) await e.close();
});

async function gatewayFor(overrides: { pdThreshold?: number } = {}): Promise<GatewayHandle> {
  const withRole = (e: EngineServerHandle, role: BackendRole) => ({ ...backendOf(e), role });
  const engines = [...prefill, ...decode];
  const gw = await startGatewayFor(engines, {
    backends: [
      ...prefill.map((e) => withRole(e, 'prefill')),
      ...decode.map((e) => withRole(e, 'decode')),
    ],
    ...overrides,
  });
  opened.push(gw);
  await waitFor(async () => (await replicas(gw)).every((r) => r.healthy), 'replicas healthy');
  return gw;
}

const client = (gw: GatewayHandle) =>
  new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });

const SYSTEM = Array.from({ length: 400 }, (_, i) => `rule${i % 53}`).join(' ');
const nameOf = (e: EngineServerHandle) => new URL(e.url).host;
const sum = (es: EngineServerHandle[], f: (e: EngineServerHandle) => number) =>
  es.reduce((s, e) => s + f(e), 0);
const gen = (e: EngineServerHandle) => e.counters().generationTokens;

async function metricsText(gw: GatewayHandle): Promise<string> {
  return (await fetch(`${gw.url}/metrics`)).text();
}

test('P/D: prefilled on the prefill pool (one token), decoded on the decode pool; the system prompt hits the prefill cache', async () => {
  const gw = await gatewayFor();
  const c = client(gw);
  const genPrefill0 = sum(prefill, gen);
  const genDecode0 = sum(decode, gen);
  const hits0 = sum(prefill, (e) => e.counters().prefixCacheHitsTokens);
  const decodeComputed0 = sum(decode, (e) => {
    const k = e.counters();
    return k.prefixCacheQueriesTokens - k.prefixCacheHitsTokens - k.kvTransfer!.externalTokens;
  });
  const prefillNames = new Set(prefill.map(nameOf));
  const decodeNames = new Set(decode.map(nameOf));
  const usedPrefill: string[] = [];
  let completion = 0;
  for (let i = 0; i < 6; i++) {
    const { data, response } = await c.chat.completions
      .create({
        model: 'm',
        messages: [
          { role: 'system', content: SYSTEM },
          { role: 'user', content: `question number ${i} about rule${i}` },
        ],
        max_tokens: 12,
      })
      .withResponse();
    const p = response.headers.get('x-kvroute-prefill-replica');
    const d = response.headers.get('x-kvroute-replica');
    assert.ok(p !== null && prefillNames.has(p), `prefill replica ${p}`);
    assert.ok(d !== null && decodeNames.has(d), `decode replica ${d}`);
    usedPrefill.push(p);
    assert.equal(data.usage?.completion_tokens, 12);
    completion += data.usage!.completion_tokens;
    assert.ok((data.choices[0]?.message.content ?? '').length > 0);
  }
  // One token per request on the prefill pool; every answer token on the decode pool.
  assert.equal(sum(prefill, gen) - genPrefill0, 6);
  assert.equal(sum(decode, gen) - genDecode0, completion);
  // The shared system prompt stays on one prefill replica, where it is a cache hit.
  assert.equal(new Set(usedPrefill.slice(1)).size, 1);
  assert.ok(sum(prefill, (e) => e.counters().prefixCacheHitsTokens) - hits0 >= 5 * 384);
  // The decode pool computed no prompt but each one's last, partial block: the rest came over
  // the link (or was already cached there from an earlier pull).
  const computedOnDecode =
    sum(decode, (e) => {
      const k = e.counters();
      return k.prefixCacheQueriesTokens - k.prefixCacheHitsTokens - k.kvTransfer!.externalTokens;
    }) - decodeComputed0;
  assert.ok(computedOnDecode <= 6 * 16, `decode computed ${computedOnDecode} prompt tokens`);
  assert.ok(sum(decode, (e) => e.counters().kvTransfer!.externalTokens) >= 384);
  await waitFor(
    () => sum(prefill, (e) => e.counters().kvTransfer!.heldBlocks) === 0,
    'holds freed',
  );
  assert.match(
    await metricsText(gw),
    /kvroute_gateway_pd_decisions_total\{model="m",path="disaggregated"\} 6/,
  );
  await waitFor(
    async () => (await replicas(gw)).every((r) => r.inFlight === 0 && r.queuedPromptTokens === 0),
    'ledger at zero',
  );
});

test('P/D: a short prompt takes the local path (--pd-threshold)', async () => {
  const gw = await gatewayFor({ pdThreshold: 256 });
  const genPrefill0 = sum(prefill, gen);
  const { data, response } = await client(gw)
    .chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: 'hi there' }],
      max_tokens: 5,
    })
    .withResponse();
  assert.equal(response.headers.get('x-kvroute-prefill-replica'), null);
  assert.ok(decode.map(nameOf).includes(response.headers.get('x-kvroute-replica')!));
  assert.equal(data.usage?.completion_tokens, 5);
  assert.equal(sum(prefill, gen), genPrefill0);
  // A long prompt still goes through the prefill pool.
  const long = await client(gw)
    .chat.completions.create({
      model: 'm',
      messages: [{ role: 'user', content: SYSTEM }],
      max_tokens: 3,
    })
    .withResponse();
  assert.ok(prefill.map(nameOf).includes(long.response.headers.get('x-kvroute-prefill-replica')!));
  const text = await metricsText(gw);
  assert.match(text, /kvroute_gateway_pd_decisions_total\{model="m",path="local"\} 1/);
  assert.match(text, /kvroute_gateway_pd_decisions_total\{model="m",path="disaggregated"\} 1/);
});

test('P/D: no request lost when a prefill engine is killed under load', async () => {
  const gw = await gatewayFor();
  const c = client(gw);
  const n = 24;
  const runs = Array.from({ length: n }, async (_, i) => {
    const stream = await c.chat.completions.create({
      model: 'm',
      messages: [
        { role: 'system', content: `${SYSTEM} tenant${i % 3}` },
        { role: 'user', content: `load ${i}` },
      ],
      max_tokens: 40,
      stream: true,
    });
    let tokens = 0;
    for await (const chunk of stream) if (chunk.choices[0]?.delta.content) tokens++;
    return tokens;
  });
  // Kill one prefill engine once some requests are under way.
  await waitFor(() => sum(decode, gen) > 0 || sum(prefill, gen) > 2, 'load under way');
  const victim = prefill[0]!;
  await victim.close();
  const got = await Promise.all(runs);
  assert.deepEqual(got, Array(n).fill(40));
  // The survivors hold nothing once every pull is done.
  await waitFor(() => prefill[1]!.counters().kvTransfer!.heldBlocks === 0, 'holds freed');
  await waitFor(
    async () => (await replicas(gw)).every((r) => r.inFlight === 0),
    'gateway ledger at zero',
  );
  prefill[0] = await startEngine({ ...ENGINE, seed: 0 });
});
