/**
 * The approximate record forgets as each peer router does (src/router/index/approxForgetting.ts), and
 * never hears of the engine's evictions:
 * - llm-d: an LRU of DefaultLRUCapacityPerServer = 31250 blocks of 16 tokens per pod (Gateway
 *   API inference extension, pkg/epp/scheduling/framework/plugins/multi/prefix/plugin.go);
 * - SGLang's router: max_tree_size = 2^24 characters per worker, enforced by a sweep every
 *   eviction_interval_secs = 60 (sgl-router/src/policies/cache_aware.rs, sgl-router/src/tree.rs);
 * - Dynamo: 120 s TTL per block, 2^20 blocks pruned to 0.8 (lib/llm/src/kv_router/approx.rs,
 *   PruneConfig::default).
 * So a route can be predicted a hit on blocks the engine evicted, where the events index knows.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { computeBlockKeys } from '../../src/kv/blockKey.ts';
import { BlockPool } from '../../src/kv/blockPool.ts';
import { approxForgetting, peerForgetMode } from '../../src/router/index/approxForgetting.ts';
import { ApproxIndex } from '../../src/router/index/approxIndex.ts';
import { Router } from '../../src/router/index.ts';
import { Scheduler } from '../../src/scheduler/scheduler.ts';

const BLOCK = 16;

test("each peer's bounds, in blocks of the engine's size, as their sources set them", () => {
  assert.deepEqual(approxForgetting('llmd', 16, 1), {
    capacityBlocks: 31_250,
    sweepMs: 0,
    ttlMs: 0,
    trimToRatio: 1,
    // plugin.go hashes only the first 256 blocks, and adds a route's in prompt order.
    maxPrefixBlocks: 256,
    recordInPromptOrder: true,
  });
  // 500,000 tokens whatever the block size.
  assert.equal(approxForgetting('llmd', 32, 1).capacityBlocks, 15_625);
  // 2^24 characters at 4 a token = 2^22 tokens.
  assert.equal(approxForgetting('sglang', 16, 1).capacityBlocks, 2 ** 22 / 16);
  assert.equal(approxForgetting('sglang', 16, 1).sweepMs, 60_000);
  assert.deepEqual(approxForgetting('dynamo', 16, 1), {
    capacityBlocks: 2 ** 20,
    sweepMs: 0,
    ttlMs: 120_000,
    trimToRatio: 0.8,
  });
  assert.equal(approxForgetting('kvroute', 16, 77).capacityBlocks, 77);
  assert.deepEqual(['llmd', 'sglang', 'dynamo', 'cost', 'round-robin'].map(peerForgetMode), [
    'llmd',
    'sglang',
    'dynamo',
    'kvroute',
    'kvroute',
  ]);
});

test('a TTL forgets a block not routed for that long; a route renews it (Dynamo)', () => {
  const index = new ApproxIndex(1, 0, 0, {
    capacityBlocks: 100,
    sweepMs: 0,
    ttlMs: 1000,
    trimToRatio: 1,
  });
  index.recordRoute(0, [1, 2], 0);
  index.recordRoute(0, [3], 500);
  index.recordRoute(0, [1], 900);
  index.forget(1000);
  // 2 was last routed at 0: expired at 1000; 1 renewed at 900, 3 routed at 500.
  assert.deepEqual(
    [1, 2, 3].map((k) => index.blocks.has(k, 0)),
    [true, false, true],
  );
  index.forget(1899);
  assert.deepEqual(
    [1, 2, 3].map((k) => index.blocks.has(k, 0)),
    [true, false, false],
  );
  index.forget(1900);
  assert.equal(index.blockCount(0), 0);
});

test('past its size, Dynamo prunes to 80 %, oldest first', () => {
  const index = new ApproxIndex(1, 0, 0, {
    capacityBlocks: 10,
    sweepMs: 0,
    ttlMs: 0,
    trimToRatio: 0.8,
  });
  index.recordRoute(0, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  assert.equal(index.blockCount(0), 10);
  index.recordRoute(0, [11]);
  // 11 > 10: down to 8, the least recent (10, 9, 8: touched last block first) gone.
  assert.equal(index.blockCount(0), 8);
  assert.deepEqual(
    [8, 9, 10].map((k) => index.blocks.has(k, 0)),
    [false, false, false],
  );
});

test("SGLang's tree grows past its size between sweeps, and is trimmed at the sweep", () => {
  const index = new ApproxIndex(2, 0, 0, {
    capacityBlocks: 4,
    sweepMs: 60_000,
    ttlMs: 0,
    trimToRatio: 1,
  });
  index.recordRoute(0, [1, 2, 3, 4, 5, 6], 1000);
  index.recordRoute(1, [7, 8, 9], 2000);
  index.forget(59_999);
  assert.equal(index.blockCount(0), 6);
  index.forget(60_000);
  assert.equal(index.blockCount(0), 4);
  assert.equal(index.blockCount(1), 3);
  // The next sweep is due at 120 s: until then, it grows again.
  index.recordRoute(0, [10, 11], 61_000);
  index.forget(119_000);
  assert.equal(index.blockCount(0), 6);
  // Sweeps missed while nothing was routed fire once, at the next read.
  index.forget(400_000);
  assert.equal(index.blockCount(0), 4);
});

/** Runs `prompt` to completion on an engine of `pool`. */
function serve(scheduler: Scheduler, id: string, toks: number[]): void {
  scheduler.add({
    id,
    promptTokens: toks.length,
    maxNewTokens: 1,
    tokenIds: toks,
    blockKeys: computeBlockKeys(toks, BLOCK),
  });
  for (let i = 0; i < 100 && scheduler.hasWork(); i++) scheduler.complete(scheduler.schedule());
  assert.equal(scheduler.hasWork(), false);
}

const prompt = (base: number) => Array.from({ length: 4 * BLOCK }, (_, i) => base + i);

test("the approximate index predicts a hit the engine already evicted; the events index doesn't", () => {
  // An engine of 8 blocks: two 4-block prompts after the first evict it.
  const pool = new BlockPool({ numBlocks: 8, blockSize: BLOCK });
  const scheduler = new Scheduler({ budgetTokens: 512, maxSeqs: 4, kvPolicy: 'paged' }, pool);
  const approx = new Router({
    replicas: ['a'],
    policy: 'round-robin',
    indexMode: 'approx',
    approxForgetting: approxForgetting('llmd', BLOCK, 1),
  });
  // The events index without its predict-on-route overlay: only what the engine published.
  const exact = new Router({
    replicas: ['a'],
    policy: 'round-robin',
    indexMode: 'events',
    overlayTtlMs: 0,
  });
  const route = (id: string, toks: number[], nowMs: number) => {
    const request = {
      id,
      blockKeys: computeBlockKeys(toks, BLOCK),
      promptTokens: toks.length,
      blockSize: BLOCK,
    };
    return [approx.route(request, nowMs), exact.route(request, nowMs)] as const;
  };
  let now = 0;
  for (const [id, base] of [
    ['first', 1000],
    ['second', 2000],
    ['third', 3000],
  ] as const) {
    route(id, prompt(base), now);
    serve(scheduler, id, prompt(base));
    exact.applyEvents('a', pool.takeEvents(), now);
    approx.onFinished(id, now);
    exact.onFinished(id, now);
    now += 10;
  }
  const keys = computeBlockKeys(prompt(1000), BLOCK);
  assert.equal(pool.findCachedPrefix(keys, keys.length).blockIds.length, 0, 'the engine evicted');
  const [guess, known] = route('first-again', prompt(1000), now);
  assert.equal(guess.cachedTokens, 4 * BLOCK, "llm-d's record still holds the whole prompt");
  assert.equal(known.cachedTokens, 0);
});
