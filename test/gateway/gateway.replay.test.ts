/**
 * The gateway's KV event subscriber against publishers framed as vLLM frames them (both replay
 * forms) and against misbehaving replay peers: gaps are filled only when the missing batches
 * come back, a replay is bounded in time and bytes, and the live stream goes on behind it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type ReplayLimits, EventSubscriber } from '../../src/serving/subscriber.ts';
import type { ForeignKvEvent } from '../../src/router/index.ts';
import {
  type EngineServerHandle,
  type GatewayHandle,
  replicas,
  startEngine,
  startGatewayFor,
  tokens,
  waitFor,
} from '../support/gateway.harness.ts';
import { encode, make, PyFloat, V025, V026 } from '../support/msgspec.ts';
import { FakeVllmPublisher, type ReplayBehaviour } from '../support/vllmPublisher.ts';

const BLOCK = 16;

/** A BlockStored batch for `toks` as vLLM >= 0.26 (map events) or < 0.26 (array events) sends it. */
function storedBatch(era: 'v026' | 'v025', toks: number[], hashSeed: number): Buffer {
  const blocks = Math.floor(toks.length / BLOCK);
  const fields = {
    block_hashes: Array.from({ length: blocks }, (_, b) =>
      BigInt.asUintN(64, 0x9e3779b97f4a7c15n * BigInt(hashSeed * 100_000 + b + 1)),
    ),
    parent_block_hash: null,
    token_ids: toks.slice(0, blocks * BLOCK),
    block_size: BLOCK,
    lora_id: null,
    medium: 'GPU',
    lora_name: null,
    extra_keys: Array.from({ length: blocks }, () => null),
  };
  if (era === 'v025') {
    return encode(
      make(V025.EventBatch, {
        ts: new PyFloat(1),
        events: [make(V025.BlockStored, fields)],
        data_parallel_rank: 0,
      }),
    );
  }
  const event = make(V026.BlockStored, {
    ...fields,
    group_idx: 0,
    kv_cache_spec_kind: 'full_attention',
  });
  return encode(
    make(V026.EventBatch, { ts: new PyFloat(1), events: [event], data_parallel_rank: 0 }),
  );
}

/** A batch that changes nothing (removes a block nobody stored). */
const noop = (n: number): Buffer =>
  encode(
    make(V026.EventBatch, {
      ts: new PyFloat(1),
      events: [make(V026.BlockRemoved, { block_hashes: [n], medium: 'GPU', group_idx: 0 })],
      data_parallel_rank: 0,
    }),
  );

async function until(probe: () => boolean, what: string, timeoutMs = 30_000): Promise<void> {
  await waitFor(() => probe() || undefined, what, timeoutMs);
}

/** A subscriber on one fake publisher; `got` collects what reached the router. */
async function subscribed(behaviour: ReplayBehaviour, limits: Partial<ReplayLimits> = {}) {
  const pub = await FakeVllmPublisher.open(behaviour, 'kv@pod-0@model');
  const got: ForeignKvEvent[][] = [];
  const sub = new EventSubscriber(
    [{ replica: 0, events: pub.endpoint, replay: pub.replayEndpoint }],
    { onEvents: (_r, events) => got.push(events), onRestart: () => {} },
    limits,
  );
  sub.start();
  // The SUB joins asynchronously: send seq 0 again until it is seen (a late join would replay).
  const first = await pub.publish(noop(0));
  await waitFor(async () => {
    if (sub.stats(0)!.batches === 0) await pub.resend(first);
    return sub.stats(0)!.batches > 0;
  }, 'the subscriber to go live');
  return {
    pub,
    sub,
    got,
    stats: () => sub.stats(0)!,
    async close() {
      await sub.close();
      await pub.close();
    },
  };
}

describe('replay bounds', () => {
  test('thirty gaps against a replay socket that never answers: live batches go on', async () => {
    const s = await subscribed('silent', { firstReplyMs: 200, backoffMs: 60_000 });
    try {
      for (let i = 0; i < 30; i++) {
        await s.pub.publish(noop(1000 + i), true); // lost on the wire
        await s.pub.publish(noop(2000 + i));
      }
      // Each gap used to wait a second for the replay (30 s in all), the live stream behind it.
      // The bound is the test's patience, not a figure: that only one replay was waited for
      // (one timeout, 29 skipped, one request) is what the counts below assert.
      await until(() => s.stats().lastSeq === '60', 'all 30 live batches after their gaps', 40_000);
      const st = s.stats();
      assert.equal(st.gapsFilled, 0, 'nothing came back, so nothing was filled');
      assert.equal(st.gapsUnfilled, 30);
      assert.equal(st.replayTimeouts, 1);
      assert.equal(st.replaysSkipped, 29, 'the silent socket is left alone after one try');
      assert.deepEqual(s.pub.requests, [1n]);
    } finally {
      await s.close();
    }
  });

  test('a replay peer that never sends the end marker is cut off at the byte bound', async () => {
    const maxBytes = 1024 * 1024;
    const s = await subscribed('endless', { maxBytes, maxMs: 60_000, backoffMs: 60_000 });
    try {
      await s.pub.publish(noop(1), true);
      await s.pub.publish(noop(2));
      await until(() => s.stats().lastSeq === '2', 'the live batch after the cut-off replay');
      const st = s.stats();
      assert.equal(st.replayCutoffs, 1);
      assert.equal(st.gapsUnfilled, 1);
      assert.ok(
        st.replayBytes <= maxBytes + 64 * 1024,
        `read ${st.replayBytes} bytes with a ${maxBytes}-byte bound`,
      );
      // The feed carries on from the live stream.
      await s.pub.publish(noop(3));
      await until(() => s.stats().lastSeq === '3', 'the next live batch');
    } finally {
      await s.close();
    }
  });

  test('a replay peer that never sends the end marker is cut off at the time bound', async () => {
    const s = await subscribed('endless', { maxBytes: 2 ** 40, maxMs: 300, backoffMs: 60_000 });
    try {
      await s.pub.publish(noop(1), true);
      await s.pub.publish(noop(2));
      await until(() => s.stats().lastSeq === '2', 'the live batch after the cut-off replay');
      assert.equal(s.stats().replayCutoffs, 1);
      assert.equal(s.stats().gapsUnfilled, 1);
    } finally {
      await s.close();
    }
  });

  test('a gap is filled only when every missing batch came back', async () => {
    const s = await subscribed('topic');
    try {
      const toks = tokens(40, 4 * BLOCK);
      await s.pub.publish(storedBatch('v026', toks, 40), true);
      await s.pub.publish(noop(5));
      await until(() => s.stats().lastSeq === '2', 'the gap to be handled');
      assert.equal(s.stats().gapsFilled, 1);
      assert.equal(s.stats().gapsUnfilled, 0);
      assert.ok(
        s.got.some((events) => events.some((e) => e.type === 'BlockStored')),
        'the lost BlockStored came back',
      );
    } finally {
      await s.close();
    }
  });
});

describe('the gateway against vLLM publishers', () => {
  let engines: EngineServerHandle[] = [];
  const pubs: FakeVllmPublisher[] = [];
  let gw: GatewayHandle;
  const forms: ReplayBehaviour[] = ['topic', 'no-topic', 'endless'];

  before(async () => {
    // The engines serve HTTP; each replica's KV events come from a vLLM-framed publisher.
    engines = [await startEngine({ kvEvents: null, kvReplay: null })];
    for (const form of forms) {
      engines.push(await startEngine({ kvEvents: null, kvReplay: null, seed: pubs.length + 1 }));
      pubs.push(await FakeVllmPublisher.open(form, form === 'topic' ? 'kv@pod@model' : ''));
    }
    gw = await startGatewayFor(engines, {
      backends: engines.map((e, i) => ({
        url: e.url,
        events: i === 0 ? null : pubs[i - 1]!.endpoint,
        replay: i === 0 ? null : pubs[i - 1]!.replayEndpoint,
        model: null,
        apiKey: null,
      })),
      policy: 'cost',
      index: 'events',
    });
    // Each subscriber goes live on its publisher's seq 0.
    for (const [i, pub] of pubs.entries()) {
      const first = await pub.publish(noop(0));
      const url = engines[i + 1]!.url;
      await waitFor(async () => {
        const r = (await replicas(gw)).find((x) => x.url === url)!;
        if (!r.subscriber || r.subscriber.batches === 0) await pub.resend(first);
        return (r.subscriber?.batches ?? 0) > 0;
      }, `replica ${url} to hear its publisher`);
    }
  });
  after(async () => {
    await gw?.close();
    await Promise.all(pubs.map((p) => p.close()));
    await Promise.all(engines.map((e) => e.close()));
  });

  const send = async (prompt: number[]) => {
    const res = await fetch(`${gw.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt, max_tokens: 1 }),
    });
    await res.text();
    return { status: res.status, replica: res.headers.get('x-kvroute-replica') };
  };

  for (const [i, form] of (['topic', 'no-topic'] as const).entries()) {
    const era = form === 'topic' ? 'v026' : 'v025';
    test(`${form} replay framing: a lost batch is replayed and its prefix routes warm`, async () => {
      const pub = pubs[i]!;
      const engine = engines[i + 1]!;
      const prefix = tokens(50 + i, 64 * BLOCK);
      await pub.publish(storedBatch(era, prefix, 50 + i), true); // lost on the wire
      await pub.publish(noop(7));
      const r = await waitFor(async () => {
        const x = (await replicas(gw)).find((y) => y.url === engine.url)!;
        return x.subscriber!.lastSeq === '2' && x;
      }, 'the gap to be handled');
      assert.equal(r.subscriber!.gapsFilled, 1);
      assert.equal(r.indexedBlocks, 64, 'the replayed batch indexed the prefix');
      const routed = await send([...prefix, ...tokens(60 + i, 40)]);
      assert.equal(routed.status, 200);
      assert.equal(routed.replica, r.name, 'the prefix went to the replica that holds it');
    });
  }

  test('a replay peer without end is cut off and the gateway keeps routing', async () => {
    const pub = pubs[2]!;
    const engine = engines[3]!;
    await pub.publish(noop(8), true);
    await pub.publish(noop(9));
    const r = await waitFor(
      async () => {
        const x = (await replicas(gw)).find((y) => y.url === engine.url)!;
        return x.subscriber!.lastSeq === '2' && x;
      },
      'the cut-off replay and the live batch behind it',
      30_000,
    );
    assert.ok(r.subscriber!.replayCutoffs >= 1);
    assert.equal(r.subscriber!.gapsUnfilled, 1);
    // Live events still index, and requests still route.
    const prefix = tokens(70, 32 * BLOCK);
    await pub.publish(storedBatch('v026', prefix, 70));
    await waitFor(
      async () =>
        (await replicas(gw)).find((y) => y.url === engine.url)!.indexedBlocks >= 32 || undefined,
      'the live batch to index',
    );
    const routed = await send([...prefix, ...tokens(71, 40)]);
    assert.equal(routed.status, 200);
    assert.equal(routed.replica, r.name);
  });
});
