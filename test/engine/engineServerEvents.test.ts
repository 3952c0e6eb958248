import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Dealer, Subscriber } from 'zeromq';
import { type BlockKey, computeBlockKeys, extendBlockKey } from '../../src/kv/blockKey.ts';
import { decodeSeq, encodeSeq, wireHashToBlockKey } from '../../src/kv/wire.ts';
import type { EngineServerHandle } from '../../src/engine/server/server.ts';
import { clientFor, startTestEngine, waitFor } from '../support/engineServerHelpers.ts';
import { readBatch, V025, V026 } from '../support/msgspec.ts';

const BLOCK = 16;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A SUB socket that records every frame triple it receives. */
function subscribe(endpoint: string) {
  const sub = new Subscriber({ linger: 0 });
  sub.connect(endpoint);
  sub.subscribe();
  const received: { topic: string; seq: bigint; payload: Buffer }[] = [];
  const loop = (async () => {
    try {
      for await (const [topic, seq, payload] of sub) {
        received.push({ topic: topic!.toString('utf8'), seq: decodeSeq(seq!), payload: payload! });
      }
    } catch {
      // closed
    }
  })();
  return {
    received,
    async close() {
      sub.close();
      await loop;
    },
  };
}

/**
 * Asks the replay socket for everything from `startSeq` on, as a DEALER does, and reads the
 * answer the way vLLM's own test does: `delimiter, topic, sequence, payload = recv_multipart()`
 * until `sequence == END_SEQ` (vLLM >= 0.26), or without the topic frame (`no-topic`, older).
 */
async function replay(
  endpoint: string,
  startSeq: bigint,
  form: 'topic' | 'no-topic' = 'topic',
  topic = '',
) {
  const dealer = new Dealer({ linger: 0, receiveTimeout: 3_000 });
  dealer.connect(endpoint);
  try {
    await dealer.send([Buffer.alloc(0), encodeSeq(startSeq)]);
    const out: { seq: bigint; payload: Buffer }[] = [];
    for (;;) {
      const frames = await dealer.receive();
      assert.equal(frames.length, form === 'topic' ? 4 : 3, `${form} replies`);
      const [delimiter, ...rest] = frames;
      assert.equal(delimiter?.length, 0, 'replies keep the empty delimiter');
      const [topicFrame, seq, payload] = form === 'topic' ? rest : [null, ...rest];
      if (seq!.equals(Buffer.alloc(8, 0xff))) {
        assert.equal(payload?.length, 0);
        if (topicFrame) assert.equal(topicFrame.length, 0, 'the end marker has an empty topic');
        return out;
      }
      if (topicFrame) assert.equal(topicFrame.toString('utf8'), topic);
      out.push({ seq: decodeSeq(seq!), payload: payload! });
    }
  } finally {
    dealer.close();
  }
}

type Era = typeof V025 | typeof V026;

/** A hash as sent: an unsigned 64-bit integer (msgpack's smaller int forms for small values). */
function hashOf(v: unknown): bigint {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number' && Number.isInteger(v) && v >= 0) return BigInt(v);
  throw new TypeError(`not a 64-bit hash: ${String(v)}`);
}

/**
 * The salt of a chain's first block, as vLLM puts it in extra_keys (kv_cache_utils.py,
 * generate_block_hash_extra_keys): (lora_name?, multimodal keys..., cache_salt), so the last
 * string of the first block's keys, when the chain starts here. These prompts carry no LoRA.
 */
function saltOf(fields: Record<string, unknown>): string | undefined {
  if (fields.parent_block_hash !== null) return undefined;
  const first = (fields.extra_keys as unknown[] | null)?.[0];
  if (!Array.isArray(first)) return undefined;
  assert.equal(fields.lora_name, null);
  const salt = first.at(-1);
  assert.equal(typeof salt, 'string', 'cache_salt is a str');
  return salt as string;
}

/**
 * What a router's index does with the events, read independently of kvroute's decoder (msgpackr
 * and vLLM's struct definitions, test/support/msgspec.ts): keep the set of cached keys, and check
 * that its own chained hash over the token ids (with the salt from extra_keys) gives the keys.
 */
function applyBatches(
  era: Era,
  payloads: readonly Buffer[],
  cached: Set<BlockKey>,
): { removed: number } {
  let removed = 0;
  for (const payload of payloads) {
    const batch = readBatch(era, payload);
    assert.equal(batch.dpRank, 0);
    for (const { type, fields: f } of batch.events) {
      if (type === 'BlockStored') {
        assert.equal(f.medium, 'GPU');
        assert.equal(f.lora_id, null);
        if (era === V026) {
          assert.equal(f.group_idx, 0);
          assert.equal(f.kv_cache_spec_kind, 'full_attention');
        }
        const hashes = (f.block_hashes as unknown[]).map(hashOf);
        const blockSize = f.block_size as number;
        const tokenIds = f.token_ids as number[];
        assert.equal(tokenIds.length, hashes.length * blockSize, 'full blocks only');
        const extraKeys = f.extra_keys as unknown[] | null;
        if (extraKeys !== null) assert.equal(extraKeys.length, hashes.length, 'a key per block');
        let parent =
          f.parent_block_hash === null ? null : wireHashToBlockKey(hashOf(f.parent_block_hash));
        const scope = { cacheSalt: saltOf(f) };
        hashes.forEach((hash, b) => {
          const tokens = tokenIds.slice(b * blockSize, (b + 1) * blockSize);
          const own = extendBlockKey(parent, tokens, parent === null ? scope : undefined);
          assert.equal(own, wireHashToBlockKey(hash), 'token ids rebuild the key');
          cached.add(own);
          parent = own;
        });
      } else if (type === 'BlockRemoved') {
        assert.equal(f.medium, 'GPU');
        for (const hash of (f.block_hashes as unknown[]).map(hashOf)) {
          assert.ok(cached.delete(wireHashToBlockKey(hash)), 'only stored blocks are removed');
          removed++;
        }
      } else cached.clear();
    }
  }
  return { removed };
}

const tokensOf = (seed: number, n: number, shared: number[] = []) => [
  ...shared,
  ...Array.from({ length: n }, (_, i) => 1000 + ((seed * 7919 + i * 104729) % 90_000)),
];

async function complete(server: EngineServerHandle, prompt: number[], salt?: string) {
  const params = {
    model: 'llama-3.3-70b',
    prompt,
    max_tokens: 3,
    ...(salt && { cache_salt: salt }),
  };
  const res = await clientFor(server).completions.create(params);
  return res.usage?.prompt_tokens_details?.cached_tokens ?? -1;
}

type Sub = ReturnType<typeof subscribe>;

/**
 * PUB/SUB drops what is published before the subscription reaches the publisher ("slow
 * joiner"): send small unique prompts until the subscriber hears one. Returns the prompts sent.
 */
async function untilLive(server: EngineServerHandle, sub: Sub, seed: number): Promise<number[][]> {
  const sent: number[][] = [];
  for (let i = 0; i < 100 && sub.received.length === 0; i++) {
    const prompt = tokensOf(seed * 1000 + i, 20);
    sent.push(prompt);
    await complete(server, prompt);
    const deadline = performance.now() + 100;
    while (sub.received.length === 0 && performance.now() < deadline) await sleep(10);
  }
  assert.ok(sub.received.length > 0, 'the subscriber went live');
  return sent;
}

/** Waits until the subscriber has every batch the publisher has sent (the replay tells). */
async function syncTo(
  server: EngineServerHandle,
  sub: Sub,
  form: 'topic' | 'no-topic' = 'topic',
): Promise<bigint> {
  const last = (await replay(server.replayEndpoint!, 0n, form)).at(-1)?.seq ?? -1n;
  await waitFor(() => (sub.received.at(-1)?.seq ?? -1n) >= last, 30_000, `live batch ${last}`);
  return last;
}

/** A router-like view: bootstrap from replay, then apply live batches after it, in order. */
async function bootstrap(
  server: EngineServerHandle,
  sub: Sub,
  form: 'topic' | 'no-topic',
  era: Era,
) {
  const cached = new Set<BlockKey>();
  const replayed = await replay(server.replayEndpoint!, 0n, form);
  let applied = replayed.at(-1)?.seq ?? -1n;
  applyBatches(
    era,
    replayed.map((r) => r.payload),
    cached,
  );
  let removed = 0;
  return {
    cached,
    get removed() {
      return removed;
    },
    async catchUp() {
      await syncTo(server, sub, form);
      const fresh = sub.received.filter((r) => r.seq > applied);
      removed += applyBatches(
        era,
        fresh.map((r) => r.payload),
        cached,
      ).removed;
      applied = sub.received.at(-1)!.seq;
    },
  };
}

test('map-form events rebuild exactly the pool cached set; replay answers a DEALER', async () => {
  const server = await startTestEngine({
    kvEvents: 'tcp://127.0.0.1:*',
    kvReplay: 'tcp://127.0.0.1:*',
  });
  const sub = subscribe(server.eventsEndpoint!);
  try {
    const warmups = await untilLive(server, sub, 1);
    const system = tokensOf(1, 300);
    const prompts: { tokens: number[]; salt?: string }[] = [
      { tokens: tokensOf(2, 50, system) },
      { tokens: tokensOf(3, 77, system) },
      { tokens: tokensOf(4, 40, system), salt: 'tenant-a' },
      { tokens: tokensOf(5, 33) },
    ];
    for (const p of prompts) await complete(server, p.tokens, p.salt);
    await Promise.all(prompts.map((p) => complete(server, p.tokens, p.salt)));
    await syncTo(server, sub);

    const expected = new Set<BlockKey>();
    for (const p of [...prompts, ...warmups.map((tokens) => ({ tokens, salt: undefined }))]) {
      for (const k of computeBlockKeys(p.tokens, BLOCK, { cacheSalt: p.salt })) expected.add(k);
    }
    const replayed = await replay(server.replayEndpoint!, 0n);
    assert.deepEqual(
      replayed.map((r) => r.seq),
      replayed.map((_, i) => BigInt(i)),
      'sequence numbers count from 0 without gaps',
    );
    const firstLive = sub.received[0]!.seq;
    assert.equal(sub.received.length, replayed.length - Number(firstLive), 'no live gaps');
    for (const live of sub.received) {
      assert.equal(live.topic, '');
      assert.ok(live.payload.equals(replayed[Number(live.seq)]!.payload), 'replay = live');
    }
    const cached = new Set<BlockKey>();
    applyBatches(
      V026,
      replayed.map((r) => r.payload),
      cached,
    );
    assert.deepEqual([...cached].sort(), [...expected].sort());

    const tail = await replay(server.replayEndpoint!, 2n);
    assert.deepEqual(
      tail.map((r) => r.seq),
      replayed.slice(2).map((r) => r.seq),
    );
  } finally {
    await sub.close();
    await server.close();
  }
});

test('array-form events under eviction predict the engine cache hit to the token', async () => {
  const server = await startTestEngine({
    kvEvents: 'tcp://127.0.0.1:*',
    kvReplay: 'tcp://127.0.0.1:*',
    kvEventsFormat: 'array',
    kvBlocks: 64,
  });
  const sub = subscribe(server.eventsEndpoint!);
  try {
    await untilLive(server, sub, 2);
    // Array events go with vLLM < 0.26's replay framing (no topic frame) by default.
    const view = await bootstrap(server, sub, 'no-topic', V025);
    const prompts = Array.from({ length: 6 }, (_, i) => tokensOf(10 + i, 400));
    for (const p of prompts) await complete(server, p);
    await view.catchUp();
    assert.ok(view.removed > 0, 'a 64-block pool evicted cached blocks');
    assert.ok(view.cached.size <= 64);
    // Positional arrays on the wire: the tag comes first, no "type" key anywhere.
    assert.ok(sub.received.every((r) => !r.payload.includes(Buffer.from('block_hashes'))));

    // The subscriber's view predicts what the engine will serve from cache, to the token.
    for (const probe of [prompts.at(-1)!, prompts.at(-2)!, prompts[0]!]) {
      const keys = computeBlockKeys(probe, BLOCK, {}, Math.floor((probe.length - 1) / BLOCK));
      let hit = 0;
      while (hit < keys.length && view.cached.has(keys[hit]!)) hit++;
      assert.equal(await complete(server, probe), hit * BLOCK);
      await view.catchUp();
    }
  } finally {
    await sub.close();
    await server.close();
  }
});

test('the replay ring is bounded; a restarted engine counts from 0 again', async () => {
  const options = {
    kvEvents: 'tcp://127.0.0.1:*',
    kvReplay: 'tcp://127.0.0.1:*',
    kvReplayBufferBatches: 3,
  };
  let server = await startTestEngine(options);
  const port = server.eventsEndpoint!.split(':').at(-1)!;
  const sub = subscribe(server.eventsEndpoint!);
  try {
    for (let i = 0; i < 20; i++) await complete(server, tokensOf(50 + i, 20));
    let kept: { seq: bigint }[] = [];
    await waitFor(
      async () => {
        kept = await replay(server.replayEndpoint!, 0n);
        return kept.at(-1)?.seq === 19n;
      },
      30_000,
      'twenty batches',
    );
    assert.deepEqual(
      kept.map((r) => r.seq),
      [17n, 18n, 19n],
    );
    await untilLive(server, sub, 3);
    const lastBefore = await syncTo(server, sub);

    await server.close();
    server = await startTestEngine({ ...options, kvEvents: `tcp://*:${port}` });
    const seen = sub.received.length;
    const after = await replay(server.replayEndpoint!, 0n);
    assert.equal(after.length, 0, 'a new engine has nothing to replay');
    let sends = 0;
    for (let i = 0; i < 100 && sub.received.length === seen; i++) {
      sends++;
      await complete(server, tokensOf(900 + i, 20));
      await sleep(50);
    }
    const first = sub.received[seen];
    assert.ok(first, 'the SUB reconnected on its own');
    assert.ok(first.seq < lastBefore, `seq ${first.seq} restarted below ${lastBefore}`);
    // One batch per small request: the new engine's last seq is its count of batches, less 1.
    const fresh = await replay(server.replayEndpoint!, 0n);
    assert.equal(fresh.at(-1)?.seq, BigInt(sends - 1));
    assert.ok(fresh.find((r) => r.seq === first.seq)?.payload.equals(first.payload));
  } finally {
    await sub.close();
    await server.close();
  }
});
