/**
 * The real gateway in front of two fake SGLang servers (test/support/sglangServer.ts), one with
 * SGLang's default page of 1 token and one with pages of 4, behind `--backend
 * URL,engine=sglang,events=...,replay=...` and blocks of 16: SGLang's KV events reach the index
 * (a prefix one server cached is routed there), a shared prefix's second request follows its
 * first, SGLang's gauges are read as load, and the tokenizer check agrees over SGLang's
 * /tokenize. Bounded waits only; no timing is asserted.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';
import { parseBackendFlag } from '../../src/serving/config.ts';
import { FakeSglangServer } from '../support/sglangServer.ts';
import { type GatewayHandle, replicas, tokens, waitFor } from '../support/gateway.harness.ts';
import { defaultConfig } from '../../src/serving/config.ts';
import { startGateway } from '../../src/gateway/gateway.ts';

const MODEL = 'sglang-model';
let servers: FakeSglangServer[] = [];
let gw: GatewayHandle;
let client: OpenAI;

interface SglReplica {
  url: string;
  indexedBlocks: number;
  running: number | null;
  waiting: number | null;
  kvUsage: number | null;
  tokenizer?: string;
  subscriber: { batches: number; connected?: boolean; decodeErrors?: number } | null;
}

async function replicaFor(server: FakeSglangServer): Promise<SglReplica> {
  const all = (await replicas(gw)) as unknown as SglReplica[];
  const r = all.find((x) => x.url === server.url);
  if (!r) throw new Error(`no replica for ${server.url}`);
  return r;
}

const nameOf = (server: FakeSglangServer): string => new URL(server.url).host;

/** A completion through the gateway; returns the replica that served it and its usage. */
async function route(prompt: number[]): Promise<{ replica: string | null; cached: number }> {
  const { data, response } = await client.completions
    .create({ model: MODEL, prompt, max_tokens: 1 })
    .withResponse();
  const details = data.usage as { prompt_tokens_details?: { cached_tokens?: number } } | undefined;
  return {
    replica: response.headers.get('x-kvroute-replica'),
    cached: details?.prompt_tokens_details?.cached_tokens ?? 0,
  };
}

before(async () => {
  servers = [
    await FakeSglangServer.start({ model: MODEL, pageSize: 1 }),
    await FakeSglangServer.start({ model: MODEL, pageSize: 4 }),
  ];
  gw = await startGateway({
    ...defaultConfig(),
    // The replica header names the address: the tests read the router by it.
    exposeReplicaAddresses: true,
    port: 0,
    scrapeMs: 100,
    blockSize: 16,
    backends: servers.map((s) =>
      parseBackendFlag(
        `${s.url},engine=sglang,events=${s.eventsEndpoint},replay=${s.replayEndpoint}`,
      ),
    ),
  });
  client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'x', maxRetries: 0 });
  // The SUB socket joins asynchronously: an empty batch, sent again until one has arrived.
  for (const s of servers) {
    const seq = await s.publishEmpty();
    await waitFor(async () => {
      const r = await replicaFor(s);
      if ((r.subscriber?.batches ?? 0) >= 1) return true;
      await s.resend(seq);
      return false;
    }, `${s.url}'s first event batch`);
  }
});

after(async () => {
  await gw?.close();
  for (const s of servers) await s.close();
});

test("SGLang's events reach the index: a prefix each server cached is routed to it", async () => {
  const [a, b] = servers as [FakeSglangServer, FakeSglangServer];
  const prefixA = tokens(101, 256);
  const prefixB = tokens(202, 256);
  await a.warm(prefixA);
  await b.warm(prefixB);
  // 256 tokens: 16 router blocks each, from pages of 1 (a) and of 4 (b).
  await waitFor(async () => (await replicaFor(a)).indexedBlocks === 16, "a's 16 blocks indexed");
  await waitFor(async () => (await replicaFor(b)).indexedBlocks === 16, "b's 16 blocks indexed");
  for (let i = 0; i < 2; i++) {
    assert.equal((await route([...prefixA, ...tokens(300 + i, 40)])).replica, nameOf(a));
    assert.equal((await route([...prefixB, ...tokens(400 + i, 40)])).replica, nameOf(b));
  }
  for (const s of servers) assert.equal((await replicaFor(s)).subscriber?.decodeErrors ?? 0, 0);
});

test("a shared prefix's second request goes where the first one's pages were stored", async () => {
  const prefix = tokens(555, 320);
  const first = await route([...prefix, ...tokens(556, 30)]);
  const server = servers.find((s) => nameOf(s) === first.replica);
  assert.ok(server, `served by ${first.replica}`);
  // Its prefill's pages were published as SGLang events: at least the prefix's 20 blocks.
  await waitFor(async () => (await replicaFor(server)).indexedBlocks >= 16 + 20, 'pages indexed');
  const second = await route([...prefix, ...tokens(557, 30)]);
  assert.equal(second.replica, first.replica);
  // The fake's radix cache hit the whole prefix (full pages of it).
  assert.ok(second.cached >= 320 - 4, `cached ${second.cached}`);
});

test("SGLang's gauges are read as the replica's load", async () => {
  const [a] = servers as [FakeSglangServer];
  a.running = 3;
  a.queued = 2;
  a.tokenUsage = 0.4;
  const r = await waitFor(async () => {
    const x = await replicaFor(a);
    return x.running === 3 && x.waiting === 2 && x.kvUsage === 0.4 ? x : false;
  }, 'the load report');
  assert.equal(r.running, 3);
  a.running = 0;
  a.queued = 0;
  a.tokenUsage = 0;
});

test("the tokenizer check agrees over SGLang's /tokenize (its text probe)", async () => {
  for (const s of servers) {
    await waitFor(async () => (await replicaFor(s)).tokenizer === 'agrees', `${s.url} agrees`);
  }
});
