/**
 * A CPU tier, live: engines with a small GPU pool and vLLM's OffloadingConnector modelled, behind
 * the gateway on 127.0.0.1. A prefix pushed out of its owner's GPU pool stays in its CPU tier;
 * the gateway's router sees it there (CPU-medium events over ZMQ, `indexedBlocksByMedium`),
 * routes the prefix back to its owner through the openai client, and the engine serves it from
 * the tier: `cached_tokens` covers it and the engine's offload counter shows the reload.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import {
  complete,
  type EngineServerHandle,
  type GatewayHandle,
  replicas,
  startEngines,
  startGatewayFor,
  tokens,
  waitFor,
} from '../support/gateway.harness.ts';

const BLOCK = 16;
const PREFIX_TOKENS = 400;
/** The last prompt token is always computed: 24 whole blocks before it. */
const PREFIX_BLOCKS = Math.floor((PREFIX_TOKENS - 1) / BLOCK);

interface TierJson {
  name: string;
  url: string;
  indexedBlocksByMedium: { GPU: number; CPU: number };
}

const tiers = async (gw: GatewayHandle) => (await replicas(gw)) as unknown as TierJson[];

describe('a prefix evicted to the CPU tier is routed back and served from it', () => {
  let engines: EngineServerHandle[] = [];
  let gw: GatewayHandle;
  before(async () => {
    // 64 GPU blocks (1,024 tokens) and 512 CPU blocks per engine.
    engines = await startEngines(2, { speedup: 50, kvBlocks: 64, cpuKvBlocks: 512 });
    gw = await startGatewayFor(engines, { policy: 'cost', index: 'events' });
  });
  after(async () => {
    await gw?.close();
    await Promise.all(engines.map((e) => e.close()));
  });

  test('cached_tokens covers the prefix, and the index shows it on the CPU', async () => {
    const openai = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const prefix = tokens(29, PREFIX_TOKENS);
    const first = await openai.completions
      .create({ model: 'llama-3.3-70b', prompt: prefix, max_tokens: 1 })
      .withResponse();
    const ownerName = first.response.headers.get('x-kvroute-replica')!;
    const owner = (await tiers(gw)).find((r) => r.name === ownerName)!;
    await waitFor(
      async () =>
        (await tiers(gw)).find((r) => r.name === ownerName)!.indexedBlocksByMedium.GPU >=
        PREFIX_BLOCKS,
      'the owner to publish the prefix on the GPU',
    );
    // Push it out of the owner's 64 GPU blocks: three 700-token prompts sent to it directly.
    for (let i = 0; i < 3; i++) {
      const r = await complete(owner.url, {
        model: 'llama-3.3-70b',
        prompt: tokens(100 + i, 700),
        max_tokens: 1,
      });
      assert.equal(r.status, 200, r.text);
    }
    const where = await waitFor(async () => {
      const r = (await tiers(gw)).find((x) => x.name === ownerName)!;
      return r.indexedBlocksByMedium.CPU >= PREFIX_BLOCKS && r;
    }, 'the evicted blocks to show in the owner CPU tier');
    assert.ok(where.indexedBlocksByMedium.GPU <= 64);
    const metricsBefore = await (await fetch(`${owner.url}/metrics`)).text();
    // Back through the gateway: the owner, though its GPU lost the prefix.
    const again = await openai.completions
      .create({ model: 'llama-3.3-70b', prompt: prefix, max_tokens: 1 })
      .withResponse();
    assert.equal(again.response.headers.get('x-kvroute-replica'), ownerName);
    const usage = again.data.usage as unknown as {
      prompt_tokens: number;
      prompt_tokens_details?: { cached_tokens?: number };
    };
    assert.equal(usage.prompt_tokens, PREFIX_TOKENS);
    assert.equal(usage.prompt_tokens_details?.cached_tokens, PREFIX_BLOCKS * BLOCK);
    const loaded = (text: string) =>
      Number(
        /vllm:kv_offload_total_bytes_total\{[^}]*transfer_type="CPU_to_GPU"[^}]*\} (\d+)/.exec(
          text,
        )?.[1] ?? 0,
      );
    const metricsAfter = await (await fetch(`${owner.url}/metrics`)).text();
    assert.ok(loaded(metricsAfter) > loaded(metricsBefore), 'the engine reloaded from its tier');
    // The reload moved the blocks back: the router sees them on the GPU again.
    await waitFor(
      async () =>
        (await tiers(gw)).find((r) => r.name === ownerName)!.indexedBlocksByMedium.GPU >=
        PREFIX_BLOCKS,
      'the reloaded prefix back on the GPU',
    );
  });
});
