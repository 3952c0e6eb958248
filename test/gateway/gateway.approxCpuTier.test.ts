/**
 * A CPU tier under the approximate index, live: two engines with 64 GPU blocks and a 512-block
 * CPU tier (vLLM's OffloadingConnector modelled) behind a gateway with `--index approx`, each
 * backend given as `--backend URL,kv-blocks=64,cpu-kv-blocks=512`. The router has no events:
 * it ages the prefix out of its record of the owner's GPU pool as its own routes fill it, keeps
 * it in its record of the owner's CPU tier, and routes the prefix back to the owner through the
 * openai client; the engine serves it from its tier (`cached_tokens` covers it, its connector
 * hit counter grows). A gateway not told the tier forgets the prefix instead.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { backendOf } from '../../src/embedded/fleet.ts';
import { parseBackendFlag } from '../../src/serving/config.ts';
import {
  type EngineServerHandle,
  type GatewayHandle,
  replicas,
  startEngines,
  startGatewayFor,
  tokens,
} from '../support/gateway.harness.ts';

const BLOCK = 16;
const PREFIX_TOKENS = 400;
/** The last prompt token is always computed: 24 whole blocks before it. */
const PREFIX_BLOCKS = Math.floor((PREFIX_TOKENS - 1) / BLOCK);
/** Unrelated prompts sent through the gateway, at most, to fill the owner's GPU pool. */
const MAX_PUSHES = 16;

interface TierJson {
  name: string;
  indexedBlocksByMedium: { GPU: number; CPU: number };
}

const tierOf = async (gw: GatewayHandle, name: string) =>
  ((await replicas(gw)) as unknown as TierJson[]).find((r) => r.name === name)!
    .indexedBlocksByMedium;

const counter = (text: string, name: string) =>
  Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\d+)`, 'm').exec(text)?.[1] ?? 0);

describe('the approximate index told the CPU tier routes a prefix back to its owner', () => {
  let engines: EngineServerHandle[] = [];
  let told: GatewayHandle;
  let blind: GatewayHandle;
  before(async () => {
    engines = await startEngines(2, { speedup: 50, kvBlocks: 64, cpuKvBlocks: 512 });
    const backends = engines.map((e) => {
      const flag = parseBackendFlag(`${e.url},kv-blocks=64,cpu-kv-blocks=512`);
      assert.deepEqual([flag.kvBlocks, flag.cpuKvBlocks], [64, 512]);
      return { ...backendOf(e), kvBlocks: 64, cpuKvBlocks: 512, events: null, replay: null };
    });
    told = await startGatewayFor(engines, { policy: 'cost', index: 'approx', backends });
    // The same engines, the record sized to their GPU pools but told no CPU tier.
    blind = await startGatewayFor(engines, {
      policy: 'cost',
      index: 'approx',
      backends: backends.map(({ cpuKvBlocks: _, ...b }) => b),
    });
  });
  after(async () => {
    await told?.close();
    await blind?.close();
    await Promise.all(engines.map((e) => e.close()));
  });

  const run = async (gw: GatewayHandle, seed: number) => {
    const openai = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const send = (prompt: number[]) =>
      openai.completions.create({ model: 'llama-3.3-70b', prompt, max_tokens: 1 }).withResponse();
    const prefix = tokens(seed, PREFIX_TOKENS);
    const first = await send(prefix);
    const owner = first.response.headers.get('x-kvroute-replica')!;
    assert.ok((await tierOf(gw, owner)).GPU >= PREFIX_BLOCKS);
    // 700-token prompts (43 blocks) through the gateway until the owner's GPU record of 64
    // blocks no longer holds the prefix's first block: two of them on the owner do it.
    let onOwner = 0;
    for (let i = 0; i < MAX_PUSHES && onOwner < 2; i++) {
      const r = await send(tokens(seed * 100 + i, 700));
      if (r.response.headers.get('x-kvroute-replica') === owner) onOwner++;
    }
    assert.equal(onOwner, 2, 'two unrelated prompts reached the owner');
    return { send, prefix, owner };
  };

  test('told: the prefix is a CPU hit of its owner, routed there and served from the tier', async () => {
    const { send, prefix, owner } = await run(told, 41);
    const where = await tierOf(told, owner);
    assert.ok(where.GPU <= 64, JSON.stringify(where));
    assert.ok(where.CPU >= PREFIX_BLOCKS, JSON.stringify(where));
    const engine = engines.find(
      (e) => backendOf(e).url === owner || owner.includes(String(e.port)),
    );
    assert.ok(engine, `the owner ${owner} among the engines`);
    const metricsBefore = await (await fetch(`${engine.url}/metrics`)).text();
    const again = await send(prefix);
    assert.equal(again.response.headers.get('x-kvroute-replica'), owner);
    const usage = again.data.usage as unknown as {
      prompt_tokens: number;
      prompt_tokens_details?: { cached_tokens?: number };
    };
    assert.equal(usage.prompt_tokens, PREFIX_TOKENS);
    assert.equal(usage.prompt_tokens_details?.cached_tokens, PREFIX_BLOCKS * BLOCK);
    const metricsAfter = await (await fetch(`${engine.url}/metrics`)).text();
    const hits = 'vllm:external_prefix_cache_hits_total';
    assert.ok(
      counter(metricsAfter, hits) > counter(metricsBefore, hits),
      'the engine served part of the prefix from its CPU tier',
    );
    // The route reloaded the prefix in the record too: on the GPU, out of the tier.
    assert.ok((await tierOf(told, owner)).GPU >= PREFIX_BLOCKS);
  });

  test('not told: the record forgets the prefix, nothing on the CPU', async () => {
    const { owner } = await run(blind, 43);
    assert.deepEqual((await tierOf(blind, owner)).CPU, 0);
  });
});
