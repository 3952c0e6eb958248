/**
 * `kvroute serve --flow-control` end to end: one simulated engine that runs one sequence at a
 * time (max-num-seqs 1), a gateway that calls its replica saturated while any prompt it routed
 * there waits for its first token (queued-prefill-ms 0) or the engine reports any request
 * waiting (queue-depth 0), and the `openai` client. A long stream holds the engine; the
 * requests sent meanwhile wait in the gateway (the queue gauge shows them), a tenant past its
 * share gets 429 with Retry-After, a client that leaves while queued frees its place and is
 * never routed, and once the long stream is gone every waiting request is served: each ends
 * 200, 429 or 503, none lost. A second gateway with a short deadline answers 503 with
 * Retry-After to a request that waited past it. Counts and statuses only, never times.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { applyConfigDoc } from '../../src/serving/config.ts';
import { startGateway } from '../../src/gateway/gateway.ts';
import {
  configFor,
  type EngineServerHandle,
  type GatewayHandle,
  startEngine,
  tokens,
  waitFor,
  within,
} from '../support/gateway.harness.ts';

const HANG_GUARD_MS = 120_000;

function flowDoc(maxWaitMs: number): object {
  return {
    'flow-control': {
      enabled: true,
      'max-queued': 8,
      'max-queued-per-tenant': 4,
      'max-wait-ms': maxWaitMs,
      saturation: { 'queue-depth': 0, 'queued-prefill-ms': 0 },
    },
    tenants: { a: { 'flow-weight': 1 }, b: { 'flow-weight': 1 }, c: { 'flow-weight': 1 } },
  };
}

async function gatewayOver(engine: EngineServerHandle, maxWaitMs: number): Promise<GatewayHandle> {
  return startGateway(applyConfigDoc(flowDoc(maxWaitMs), configFor([engine])));
}

function clientFor(gw: GatewayHandle, tenant: string): OpenAI {
  return new OpenAI({
    baseURL: `${gw.url}/v1`,
    apiKey: 'unused',
    maxRetries: 0,
    timeout: HANG_GUARD_MS,
    defaultHeaders: { 'x-kvroute-tenant': tenant },
  });
}

/** Sum of a metric's samples whose labels include `match`, from the gateway's /metrics. */
async function metricSum(
  gw: GatewayHandle,
  name: string,
  match: Record<string, string> = {},
): Promise<number> {
  const text = await (await fetch(`${gw.url}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const labels = line.slice(name.length, line.lastIndexOf(' '));
    if (Object.entries(match).every(([k, v]) => labels.includes(`${k}="${v}"`))) {
      sum += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return sum;
}

/** A long stream that holds the engine's one sequence until aborted; resolves once it runs. */
async function holdEngine(client: OpenAI, model: string): Promise<{ release(): Promise<void> }> {
  const controller = new AbortController();
  const stream = await client.completions.create(
    { model, prompt: tokens(1, 48), max_tokens: 4000, stream: true, ignore_eos: true } as never,
    { signal: controller.signal },
  );
  const iterator = (stream as unknown as AsyncIterable<unknown>)[Symbol.asyncIterator]();
  await iterator.next();
  return {
    async release() {
      controller.abort();
      await iterator.return?.().catch(() => {});
    },
  };
}

type Outcome = { tenant: string; status: number; retryAfter: string | null };

function short(
  client: OpenAI,
  tenant: string,
  model: string,
  seed: number,
  signal?: AbortSignal,
): Promise<Outcome> {
  return client.completions
    .create({ model, prompt: tokens(seed, 32), max_tokens: 2 }, signal ? { signal } : {})
    .then(
      () => ({ tenant, status: 200, retryAfter: null }),
      (err: unknown) => {
        if (err instanceof OpenAI.APIError && err.status !== undefined) {
          return {
            tenant,
            status: err.status,
            retryAfter: err.headers?.get('retry-after') ?? null,
          };
        }
        if (err instanceof OpenAI.APIUserAbortError)
          return { tenant, status: 499, retryAfter: null };
        throw err;
      },
    );
}

describe('kvroute serve --flow-control', () => {
  let engine: EngineServerHandle;
  let gw: GatewayHandle;
  before(async () => {
    engine = await startEngine({ maxSeqs: 1 });
    gw = await gatewayOver(engine, HANG_GUARD_MS);
  });
  after(async () => {
    await gw?.close();
    await engine?.close();
  });

  test('requests wait while the engine is full, a tenant past its share gets 429, a client that leaves frees its place, the rest are served', async () => {
    const model = engine.servedModelName;
    const [a, b, c] = ['a', 'b', 'c'].map((t) => clientFor(gw, t)) as [OpenAI, OpenAI, OpenAI];
    const held = await within(30_000, holdEngine(a, model), 'the long stream');
    const sent: Promise<Outcome>[] = [];
    for (let i = 0; i < 6; i++) sent.push(short(a, 'a', model, 100 + i));
    for (let i = 0; i < 3; i++) sent.push(short(b, 'b', model, 200 + i));
    // One of them may reach the engine (and wait there); the others wait in the gateway.
    await waitFor(
      async () => (await metricSum(gw, 'kvroute_flow_queued')) >= 6,
      'six requests queued in the gateway',
      HANG_GUARD_MS,
    );
    const leaving = new AbortController();
    const left = short(c, 'c', model, 300, leaving.signal);
    await waitFor(
      async () => (await metricSum(gw, 'kvroute_flow_queued', { tenant: 'c' })) === 1,
      "tenant c's request queued",
      HANG_GUARD_MS,
    );
    const decisionsBefore = gw.router.snapshot(Date.now()).counters.decisions;
    leaving.abort();
    assert.equal((await within(30_000, left, 'the aborted request')).status, 499);
    await waitFor(
      async () =>
        (await metricSum(gw, 'kvroute_flow_cancelled_total', { tenant: 'c' })) === 1 &&
        (await metricSum(gw, 'kvroute_flow_queued', { tenant: 'c' })) === 0,
      "tenant c's place freed",
      HANG_GUARD_MS,
    );
    assert.equal(gw.router.snapshot(Date.now()).counters.decisions, decisionsBefore);

    await held.release();
    const outcomes = await within(HANG_GUARD_MS, Promise.all(sent), 'the queued requests');
    for (const o of outcomes) assert.ok([200, 429].includes(o.status), JSON.stringify(o));
    const served = outcomes.filter((o) => o.status === 200).length;
    const refused = outcomes.filter((o) => o.status === 429);
    assert.ok(refused.length >= 1, 'tenant a sent 6 with a share of 4 (one may reach the engine)');
    for (const o of refused) {
      assert.equal(o.tenant, 'a');
      assert.ok(Number(o.retryAfter) >= 1, `Retry-After ${o.retryAfter}`);
    }
    assert.ok(outcomes.filter((o) => o.tenant === 'b').every((o) => o.status === 200));
    // Routed: the long stream and each served request; never tenant c's.
    assert.equal(gw.router.snapshot(Date.now()).counters.decisions, 1 + served);
    const dispatched = await metricSum(gw, 'kvroute_flow_dispatched_total');
    assert.ok(dispatched >= served - 1 && dispatched <= served, `dispatched ${dispatched}`);
    assert.equal(await metricSum(gw, 'kvroute_flow_queued'), 0);
    assert.equal(
      await metricSum(gw, 'kvroute_flow_rejected_total', { reason: 'tenant-full' }),
      refused.length,
    );
  });

  test('an unknown priority class in x-kvroute-priority is a 400 naming the classes', async () => {
    const res = await fetch(`${gw.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-kvroute-priority': 'urgent' },
      body: JSON.stringify({ model: engine.servedModelName, prompt: 'hi', max_tokens: 1 }),
    });
    assert.equal(res.status, 400);
    const body = (await res.json()) as { error: { message: string; code: number } };
    assert.equal(body.error.code, 400);
    assert.match(body.error.message, /x-kvroute-priority must name a priority class \(default\)/);
  });
});

describe('kvroute serve --flow-control deadline', () => {
  let engine: EngineServerHandle;
  let gw: GatewayHandle;
  before(async () => {
    engine = await startEngine({ maxSeqs: 1 });
    gw = await gatewayOver(engine, 300);
  });
  after(async () => {
    await gw?.close();
    await engine?.close();
  });

  test('a request still waiting at the deadline gets 503 with Retry-After', async () => {
    const model = engine.servedModelName;
    const a = clientFor(gw, 'a');
    const held = await within(30_000, holdEngine(a, model), 'the long stream');
    // One reaches the engine and waits there (its prefill queued); the other waits here.
    const outcomes = await within(
      HANG_GUARD_MS,
      (async () => {
        const both = [short(a, 'a', model, 10), short(clientFor(gw, 'b'), 'b', model, 11)];
        const first = await Promise.race(both);
        await held.release();
        return [first, ...(await Promise.all(both)).filter((o) => o !== first)];
      })(),
      'the two requests',
    );
    assert.equal(outcomes[0]!.status, 503, JSON.stringify(outcomes));
    assert.ok(Number(outcomes[0]!.retryAfter) >= 1);
    assert.equal(outcomes[1]!.status, 200);
    assert.equal(await metricSum(gw, 'kvroute_flow_rejected_total', { reason: 'expired' }), 1);
  });
});
