/**
 * The audit live: two simulated engines behind the gateway, one with a small KV pool that never
 * publishes BlockRemoved (`--fault-drop-events removed`). Prompts cycle over more prefixes than
 * the small pool holds, so the index keeps blocks that engine evicted: within 60 requests its
 * replica is `over-predicts` and repaired (the replay cannot mend it, so it is routed on the
 * approximate index), the healthy replica stays `ok`, and the prediction error after the repair
 * is under 10 % of the prompt tokens. Half the requests stream through the openai client
 * (usage asked upstream and stripped), half are plain JSON.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import {
  type EngineServerHandle,
  type GatewayHandle,
  startEngine,
  startGatewayFor,
  tokens,
  waitFor,
} from '../support/gateway.harness.ts';

const PREFIXES = 20;
const PREFIX_TOKENS = 128; // 8 blocks of 16
const SUFFIX_TOKENS = 8;
const SMALL_POOL_BLOCKS = 64;

interface AuditJson {
  verdict: string;
  predictedTokens: number;
  reportedTokens: number;
  promptTokens: number;
  hitRateError: number | null;
  window: { requests: number; size: number; over: number; under: number; threshold: number };
  repair: { stage: string; last: string | null; repairs: number };
  indexSource: string;
}

let healthy: EngineServerHandle;
let faulty: EngineServerHandle;
let gw: GatewayHandle;
let client: OpenAI;

before(async () => {
  healthy = await startEngine({ seed: 1, speedup: 100 });
  faulty = await startEngine({
    seed: 2,
    speedup: 100,
    kvBlocks: SMALL_POOL_BLOCKS,
    faults: { dropEvents: 'removed' },
  });
  gw = await startGatewayFor([healthy, faulty], { scrapeMs: 50 });
  client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});

after(async () => {
  await gw?.close();
  await healthy?.close();
  await faulty?.close();
});

const prompt = (i: number): number[] => [
  ...tokens(1000 + (i % PREFIXES), PREFIX_TOKENS),
  ...tokens(50_000 + i, SUFFIX_TOKENS),
];

async function replicasJson(): Promise<
  { url: string; audit: AuditJson; subscriber: { lastSeq: string | null } | null }[]
> {
  const res = await fetch(`${gw.url}/router/replicas`);
  return ((await res.json()) as { replicas: never[] }).replicas;
}

async function auditOf(engine: EngineServerHandle): Promise<AuditJson> {
  return (await replicasJson()).find((r) => r.url === engine.url)!.audit;
}

/**
 * Until the KV events of the last request are in: each replica's subscriber has applied the
 * last batch its engine published (a batch the faulty engine emptied is never published).
 */
async function settle(): Promise<void> {
  await waitFor(async () => {
    const replicas = await replicasJson();
    return [healthy, faulty].every((engine) => {
      const published = engine.kvEventBatches();
      const last = replicas.find((r) => r.url === engine.url)?.subscriber?.lastSeq ?? null;
      return published === 0 ? last === null : last === String(published - 1);
    });
  }, 'KV events to settle');
}

/** One request; returns the cached tokens the engine reported (through the gateway). */
async function send(i: number): Promise<number> {
  const model = healthy.servedModelName;
  if (i % 2 === 0) {
    const res = await client.completions.create({ model, prompt: prompt(i), max_tokens: 1 });
    return res.usage?.prompt_tokens_details?.cached_tokens ?? -1;
  }
  // Streamed without usage: the gateway asks for it and strips it; the client sees none.
  const stream = await client.completions.create({
    model,
    prompt: prompt(i),
    max_tokens: 1,
    stream: true,
  });
  for await (const chunk of stream) assert.equal(chunk.usage, undefined);
  return 0;
}

async function metric(name: string, replicaUrl: string): Promise<number> {
  const text = await (await fetch(`${gw.url}/metrics`)).text();
  const host = new URL(replicaUrl).host;
  const line = text.split('\n').find((l) => l.startsWith(`${name}{replica="${host}"`));
  return line ? Number(line.split(' ').pop()) : 0;
}

test('one replica losing BlockRemoved is caught and repaired within 60 requests; the other stays ok', async () => {
  let repairedAt: number | null = null;
  for (let i = 0; i < 60 && repairedAt === null; i++) {
    await send(i);
    await settle();
    if ((await auditOf(faulty)).repair.repairs > 0) repairedAt = i + 1;
    assert.equal(
      (await auditOf(healthy)).verdict,
      'ok',
      `healthy replica flagged at request ${i + 1}`,
    );
  }
  assert.ok(repairedAt !== null, 'the faulty replica was not repaired within 60 requests');
  // The replay cannot bring back removals the engine never published: the fallback follows.
  const repaired = await waitFor(async () => {
    const a = await auditOf(faulty);
    return a.indexSource === 'approx' && a;
  }, 'the approximate fallback');
  assert.equal(repaired.repair.stage, 'approx');
  assert.equal(repaired.repair.last, 'approx');
  assert.ok((await metric('kvroute_gateway_index_repairs_total', faulty.url)) >= 1);

  // After the repair: the prediction error over both replicas, from the gateway's counters.
  const predictedBefore =
    (await metric('kvroute_gateway_predicted_cached_tokens_total', faulty.url)) +
    (await metric('kvroute_gateway_predicted_cached_tokens_total', healthy.url));
  const reportedBefore =
    (await metric('kvroute_gateway_reported_cached_tokens_total', faulty.url)) +
    (await metric('kvroute_gateway_reported_cached_tokens_total', healthy.url));
  const after = 120;
  for (let i = repairedAt; i < repairedAt + after; i++) {
    await send(i);
    await settle();
  }
  const predicted =
    (await metric('kvroute_gateway_predicted_cached_tokens_total', faulty.url)) +
    (await metric('kvroute_gateway_predicted_cached_tokens_total', healthy.url)) -
    predictedBefore;
  const reported =
    (await metric('kvroute_gateway_reported_cached_tokens_total', faulty.url)) +
    (await metric('kvroute_gateway_reported_cached_tokens_total', healthy.url)) -
    reportedBefore;
  const promptTokens = after * (PREFIX_TOKENS + SUFFIX_TOKENS);
  const error = Math.abs(predicted - reported) / promptTokens;
  const f = await auditOf(faulty);
  const h = await auditOf(healthy);
  console.log(
    JSON.stringify({
      repairedAtRequest: repairedAt,
      afterRepair: { requests: after, predicted, reported, promptTokens, hitRateError: error },
      faulty: f,
      healthy: h,
    }),
  );
  assert.equal(h.verdict, 'ok');
  assert.equal(f.verdict, 'ok');
  assert.equal(f.indexSource, 'approx');
  assert.ok(error < 0.1, `prediction error after the repair ${(error * 100).toFixed(1)} %`);
  assert.equal(f.window.over, 0, 'no over-prediction on the repaired replica');
});
