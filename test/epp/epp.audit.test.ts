/**
 * The endpoint picker's cache audit, from the response path: the picker follows the response
 * the data plane sends it and hands the pool's audit what the engine said it reused, against
 * what the router predicted for the picked replica. The responses here go through a real
 * embedded engine (forwarded as Envoy would), so the reported counts are the engine's own.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { waitFor, within } from '../support/gateway.harness.ts';
import {
  EnvoyStream,
  envoyClient,
  httpBody,
  httpHeaders,
  requestHeaders,
  setHeader,
} from '../support/envoy.ts';
import { type EppFleetHandle, startTestEpp } from '../support/epp.ts';

let epp: EppFleetHandle;
let client: ReturnType<typeof envoyClient>;

before(async () => {
  epp = await startTestEpp(2, 'cost');
  client = envoyClient(epp.address);
});
after(async () => {
  client?.close();
  await epp?.close();
});

const prompt = (seed: number) =>
  Array.from({ length: 600 }, (_, i) => `w${(seed * 7919 + i * 31) % 4000}`).join(' ');

/** One request through the picker, forwarded to the picked engine, its response followed. */
async function exchange(
  body: Record<string, unknown>,
): Promise<{ replica: string; cached: number | null }> {
  const bytes = Buffer.from(JSON.stringify(body));
  // Envoy's side, written by field number (test/support/envoy.ts): 4 request_body, 3
  // response_headers, 5 response_body.
  const stream = new EnvoyStream(client);
  stream.send(requestHeaders('/v1/completions'));
  stream.send({ 4: httpBody(bytes, true) });
  const head = await stream.next();
  const endpoint = setHeader(head.request_headers, 'x-gateway-destination-endpoint')!;
  const sent: Buffer[] = [];
  for (;;) {
    const r = await stream.next();
    const s = r.request_body.response.body_mutation.streamed_response;
    sent.push(Buffer.from(s.body));
    if (s.end_of_stream) break;
  }
  const res = await fetch(`http://${endpoint}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: Buffer.concat(sent),
  });
  stream.send({
    3: httpHeaders({
      ':status': String(res.status),
      'content-type': res.headers.get('content-type') ?? '',
    }),
  });
  const answer = await stream.next();
  const replica = setHeader(answer.response_headers, 'x-kvroute-replica')!;
  const text = Buffer.from(await res.arrayBuffer());
  stream.send({ 5: httpBody(text, true) });
  await stream.next();
  stream.end();
  await within(120_000, stream.status, 'stream end');
  let cached: number | null = null;
  if (!body.stream) {
    cached = (
      JSON.parse(text.toString()) as { usage: { prompt_tokens_details: { cached_tokens: number } } }
    ).usage.prompt_tokens_details.cached_tokens;
  }
  return { replica, cached };
}

const auditOf = (replica: string) =>
  epp.pools.snapshot(Date.now()).replicas.find((r) => r.name === replica)!.audit;

test('each response is graded for the picked replica: predicted against reported', async () => {
  const first = await exchange({ prompt: prompt(1), max_tokens: 2 });
  const a1 = auditOf(first.replica);
  assert.equal(a1.window.requests, 1);
  assert.equal(a1.reportedTokens, first.cached);
  assert.equal(a1.sources.usage, 1);
  // The same prompt again: the router predicts it cached where it went, the engine agrees.
  await waitFor(() => auditOf(first.replica).judged === 1 && true, 'the first judgment');
  const second = await exchange({ prompt: prompt(1), max_tokens: 2 });
  assert.equal(second.replica, first.replica);
  assert.ok((second.cached ?? 0) > 0);
  const a2 = auditOf(first.replica);
  assert.equal(a2.window.requests, 2);
  assert.equal(a2.reportedTokens, (first.cached ?? 0) + (second.cached ?? 0));
  assert.ok(Math.abs(a2.predictedTokens - a2.reportedTokens) <= 16 * 2, JSON.stringify(a2));
  assert.equal(a2.verdict, 'ok');
  const text = await (await fetch(`http://127.0.0.1:${epp.metricsPort}/metrics`)).text();
  assert.match(
    text,
    new RegExp(
      `kvroute_gateway_reported_cached_tokens_total\\{replica="${first.replica}",model="[^"]*"\\} ${a2.reportedTokens}`,
    ),
  );
});

test('a stream whose client did not ask for usage is judged by the hit counter', async () => {
  const r = await exchange({ prompt: prompt(2), max_tokens: 2, stream: true });
  await waitFor(() => auditOf(r.replica).sources.hitCounter >= 1, 'the hit-counter judgment');
  assert.ok(auditOf(r.replica).sources.hitCounter >= 1);
});
