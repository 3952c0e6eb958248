/**
 * The gateway end to end on 127.0.0.1: simulated engines publishing KV events, the gateway
 * routing real requests (through the openai client), and what the router learns from both.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import type { WireFormat } from '../../src/kv/wire.ts';
import {
  complete,
  type EngineServerHandle,
  type GatewayHandle,
  replicaOf,
  replicas,
  restartEngine,
  startEngines,
  startGatewayFor,
  tokens,
  waitFor,
} from '../support/gateway.harness.ts';

const PREFIX_TOKENS = 6_000;
const PREFIX_BLOCKS = PREFIX_TOKENS / 16;
const SUFFIX_TOKENS = 1_000;
const BURST = 30;

function client(gw: GatewayHandle): OpenAI {
  return new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120_000 });
}

describe('cost routing spills a hot prefix to a second owner', () => {
  let engines: EngineServerHandle[] = [];
  let gw: GatewayHandle;
  before(async () => {
    // Slower than real time: 1,000 uncached tokens take ~710 ms of wall time to prefill, so the
    // burst queues up on the owner even when a busy host spreads its arrivals over seconds (the
    // ledger frees a prompt as soon as the KV events show it stored). At 0.5 (~140 ms) a host
    // with two busy loops beside the suite routed the burst slower than the owner drained it.
    engines = await startEngines(3, { speedup: 0.1 });
    gw = await startGatewayFor(engines, { policy: 'cost', index: 'events' });
  });
  after(async () => {
    await gw?.close();
    await Promise.all(engines.map((e) => e.close()));
  });

  test('requests sharing a 6,000-token prefix stay with the owner until its queue outgrows the hit', async () => {
    const openai = client(gw);
    const prefix = tokens(1, PREFIX_TOKENS);
    const send = (i: number) =>
      openai.completions
        .create({
          model: 'llama-3.3-70b',
          prompt: [...prefix, ...tokens(1000 + i, SUFFIX_TOKENS)],
          max_tokens: 2,
        })
        .withResponse()
        .then(({ response }) => response.headers.get('x-kvroute-replica')!);

    const owner = await send(0);
    await waitFor(
      async () =>
        (await replicas(gw)).find((r) => r.name === owner)!.indexedBlocks >= PREFIX_BLOCKS,
      'the owner to publish the prefix blocks',
    );
    // A warm request adds 1,000 uncached tokens to the owner's queue; a cold replica would take
    // 7,000. The owner wins while its queue is under the 6,000 tokens a hit saves (6 requests).
    const burst = await Promise.all(Array.from({ length: BURST }, (_, i) => send(i + 1)));
    const counts = new Map<string, number>();
    for (const r of burst) counts.set(r, (counts.get(r) ?? 0) + 1);
    const onOwner = counts.get(owner) ?? 0;
    const seen = JSON.stringify([...counts]);
    assert.ok(onOwner >= 6, `owner took only ${onOwner} of ${BURST}: ${seen}`);
    assert.ok(onOwner < BURST, `owner took all ${BURST}: no spill`);
    const spilledTo = [...counts.keys()].filter((r) => r !== owner);
    assert.ok(spilledTo.length >= 1);
    // The spill warmed the second replica: its engine now reports the prefix's blocks.
    const second = spilledTo[0]!;
    await waitFor(
      async () =>
        (await replicas(gw)).find((r) => r.name === second)!.indexedBlocks >= PREFIX_BLOCKS,
      'the second owner to hold the prefix',
    );
    // Once queues drain, the prefix goes to a replica holding it, never a cold one.
    await waitFor(
      async () => (await replicas(gw)).every((r) => r.inFlight === 0),
      'queues to drain',
    );
    const cold = (await replicas(gw))
      .filter((r) => r.indexedBlocks < PREFIX_BLOCKS)
      .map((r) => r.name);
    for (let i = 0; i < 3; i++) {
      const r = await send(100 + i);
      assert.ok(!cold.includes(r), `went to cold replica ${r}`);
    }
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    assert.match(metrics, /kvroute_gateway_spills_total\{policy="cost",model="[^"]+"\} [1-9]/);
    assert.match(
      metrics,
      /kvroute_gateway_prompt_tokens_routed_total\{kind="cached",model="[^"]+"\} [1-9]/,
    );
  });
});

for (const [mode, format] of [
  ['events', 'map'],
  ['events', 'array'],
  ['approx', 'map'],
] as const satisfies readonly (readonly ['events' | 'approx', WireFormat])[]) {
  describe(`${mode} index, ${format} wire form`, () => {
    let engines: EngineServerHandle[] = [];
    let gw: GatewayHandle;
    before(async () => {
      engines = await startEngines(3, { speedup: 20, kvEventsFormat: format });
      gw = await startGatewayFor(engines, { index: mode });
    });
    after(async () => {
      await gw?.close();
      await Promise.all(engines.map((e) => e.close()));
    });

    test('a repeated prefix goes back to its owner', async () => {
      const prefix = tokens(7, 2_048);
      const first = await complete(gw.url, {
        prompt: [...prefix, ...tokens(70, 64)],
        max_tokens: 1,
      });
      assert.equal(first.status, 200, first.text);
      if (mode === 'events') {
        // The exact index is fed by the engine's events only (it does not record routes).
        await waitFor(
          async () =>
            (await replicas(gw)).find((r) => r.name === first.replica)!.indexedBlocks >= 128,
          'events to index the prefix',
        );
      }
      for (let i = 0; i < 4; i++) {
        const again = await complete(gw.url, {
          prompt: [...prefix, ...tokens(71 + i, 64)],
          max_tokens: 1,
        });
        assert.equal(again.replica, first.replica);
        assert.ok((again.json?.usage?.prompt_tokens_details?.cached_tokens ?? 0) >= 2_048);
      }
    });

    if (mode === 'events') {
      test('an engine restart clears its blocks in the gateway', async () => {
        const seeded = await complete(gw.url, { prompt: tokens(8, 1_024), max_tokens: 1 });
        assert.equal(seeded.status, 200, seeded.text);
        const index = engines.findIndex((e) => e.url.endsWith(seeded.replica!));
        await waitFor(
          async () => (await replicaOf(gw, engines[index]!)).indexedBlocks >= 64,
          'events to index the prompt',
        );
        const old = engines[index]!;
        await old.close();
        const fresh = await restartEngine(old, { speedup: 20, kvEventsFormat: format });
        engines[index] = fresh;
        // The new incarnation publishes from sequence 0: the old blocks must go.
        await waitFor(async () => (await replicaOf(gw, fresh)).healthy, 'the replica to be up');
        // A new prompt each time (up to 12 of 4 blocks, fewer than the old 64): a batch published
        // while the subscriber is still joining the new publisher is lost, and only a later one
        // (its sequence past the gap) brings it back by replay. A repeated prompt publishes nothing.
        let sent = 0;
        await waitFor(async () => {
          if (sent < 12) sent++;
          const r = await fetch(`${fresh.url}/v1/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ prompt: tokens(100 + sent, 64), max_tokens: 1 }),
          });
          await r.text();
          const now = await replicaOf(gw, fresh);
          return now.indexedBlocks > 0 && now.indexedBlocks <= 4 * sent && now;
        }, 'the replica to show only its new blocks');
      });
    }
  });
}
