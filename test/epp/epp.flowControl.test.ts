/**
 * `kvroute epp --flow-control`, played from Envoy's side (test/support/envoy.ts) over one
 * simulated replica: the picker calls the replica saturated while a prompt it picked there waits
 * for its first token (queued-prefill-ms 0), so a second request waits in the picker, before
 * the pick, where llm-d's EPP holds requests in its flow controller. Answers as llm-d's
 * (`pkg/epp/requestcontrol/admission.go`): a full queue an immediate 429, a request past its
 * deadline an immediate 503, both with Retry-After; a stream the data plane cancels while
 * queued leaves the queue unpicked; a waiting request is picked once the replica has room.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startEppWithFleet } from '../../src/embedded/epp.ts';
import { applyConfigDoc, defaultConfig } from '../../src/serving/config.ts';
import { waitFor, within } from '../support/gateway.harness.ts';
import { EnvoyStream, envoyClient, httpBody, requestHeaders, setHeader } from '../support/envoy.ts';

const CHAT = '/v1/chat/completions';
const HANG_GUARD_MS = 120_000;

type Epp = Awaited<ReturnType<typeof startEppWithFleet>>;

async function startFlowEpp(maxWaitMs: number): Promise<Epp> {
  const config = applyConfigDoc(
    {
      'flow-control': {
        enabled: true,
        'max-queued': 1,
        'max-queued-per-tenant': 1,
        'max-wait-ms': maxWaitMs,
        saturation: { 'queue-depth': 1000, 'queued-prefill-ms': 0 },
      },
      tenants: { a: { 'flow-weight': 1 }, b: { 'flow-weight': 1 } },
    },
    { ...defaultConfig(), embeddedReplicas: 1, policy: 'cost' },
  );
  return startEppWithFleet(config, {
    port: 0,
    healthPort: 0,
    metricsPort: 0,
    embeddedSpeedup: 500,
  });
}

async function metricSum(epp: Epp, name: string, match: Record<string, string> = {}) {
  let sum = 0;
  for (const line of (await epp.metrics.registry.metrics()).split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const labels = line.slice(name.length, line.lastIndexOf(' '));
    if (Object.entries(match).every(([k, v]) => labels.includes(`${k}="${v}"`))) {
      sum += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return sum;
}

/** Sends one chat request's headers and body; its first answer is read by the caller. */
function send(client: ReturnType<typeof envoyClient>, tenant: string, text: string): EnvoyStream {
  const stream = new EnvoyStream(client);
  stream.send(requestHeaders(CHAT, { headers: { 'x-kvroute-tenant': tenant } }));
  const body = { messages: [{ role: 'user', content: text }], max_tokens: 2 };
  stream.send({ 4: httpBody(Buffer.from(JSON.stringify(body)), true) });
  return stream;
}

function retryAfterOf(ir: { headers?: { set_headers?: unknown[] } }): number {
  for (const h of (ir.headers?.set_headers ?? []) as {
    header: { key: string; raw_value: Uint8Array };
  }[]) {
    if (h.header.key === 'retry-after') return Number(Buffer.from(h.header.raw_value).toString());
  }
  return Number.NaN;
}

describe('kvroute epp --flow-control', () => {
  let epp: Epp;
  let client: ReturnType<typeof envoyClient>;
  before(async () => {
    epp = await startFlowEpp(HANG_GUARD_MS);
    client = envoyClient(epp.address);
  });
  after(async () => {
    client?.close();
    await epp?.close();
  });

  test('waits while the replica is saturated: full is 429, a cancelled stream leaves unpicked, room picks the next', async () => {
    const held = send(client, 'a', 'held: its prompt stays queued on the replica');
    const first = await within(HANG_GUARD_MS, held.next(), 'the first pick');
    assert.equal(first.response, 'request_headers');
    assert.ok(setHeader(first.request_headers, 'x-gateway-destination-endpoint'));
    const decisions = () =>
      epp.pools.all().reduce((n, p) => n + p.router.snapshot(Date.now()).counters.decisions, 0);
    const picked = decisions();

    // Queued (the pool is saturated); the data plane then gives it up.
    const gone = send(client, 'b', 'given up while queued');
    await waitFor(
      async () => (await metricSum(epp, 'kvroute_flow_queued')) === 1,
      'one queued',
      HANG_GUARD_MS,
    );
    // The queue holds one: the next is refused at once.
    const refused = await within(HANG_GUARD_MS, send(client, 'a', 'no room').next(), 'the 429');
    assert.equal(refused.response, 'immediate_response');
    assert.equal(refused.immediate_response.status.code, 'TooManyRequests');
    assert.ok(retryAfterOf(refused.immediate_response) >= 1);
    assert.equal(
      JSON.parse(Buffer.from(refused.immediate_response.body).toString()).error.code,
      429,
    );
    gone.cancel();
    await waitFor(
      async () =>
        (await metricSum(epp, 'kvroute_flow_queued')) === 0 &&
        (await metricSum(epp, 'kvroute_flow_cancelled_total', { tenant: 'b' })) === 1,
      'the cancelled request out of the queue',
      HANG_GUARD_MS,
    );
    assert.equal(decisions(), picked, 'the cancelled request was never picked');

    // Queued again; the held stream ends, the replica has room, the waiting one is picked.
    const next = send(client, 'b', 'waits, then picked');
    await waitFor(
      async () => (await metricSum(epp, 'kvroute_flow_queued')) === 1,
      'one queued again',
      HANG_GUARD_MS,
    );
    held.cancel();
    const answer = await within(HANG_GUARD_MS, next.next(), 'the queued pick');
    assert.equal(answer.response, 'request_headers');
    assert.ok(setHeader(answer.request_headers, 'x-gateway-destination-endpoint'));
    assert.equal(await metricSum(epp, 'kvroute_flow_dispatched_total', { tenant: 'b' }), 1);
    next.cancel();
  });
});

describe('kvroute epp --flow-control deadline', () => {
  let epp: Epp;
  let client: ReturnType<typeof envoyClient>;
  before(async () => {
    epp = await startFlowEpp(300);
    client = envoyClient(epp.address);
  });
  after(async () => {
    client?.close();
    await epp?.close();
  });

  test('a request still queued at the deadline is an immediate 503 with Retry-After', async () => {
    const held = send(client, 'a', 'held');
    assert.equal(
      (await within(HANG_GUARD_MS, held.next(), 'the first pick')).response,
      'request_headers',
    );
    const late = await within(HANG_GUARD_MS, send(client, 'b', 'too late').next(), 'the 503');
    assert.equal(late.response, 'immediate_response');
    assert.equal(late.immediate_response.status.code, 'ServiceUnavailable');
    assert.ok(retryAfterOf(late.immediate_response) >= 1);
    assert.equal(await metricSum(epp, 'kvroute_flow_rejected_total', { reason: 'expired' }), 1);
    held.cancel();
  });
});
