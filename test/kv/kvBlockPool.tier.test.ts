/**
 * The block pool's CPU tier (its slots in the pool's own key table) against a tier kept apart:
 * a pool without a tier whose events feed an LRU Map as vLLM's OffloadingConnector would (a
 * GPU eviction is stored, the least recent making room; a key the GPU stores again leaves).
 * Whatever the requests, both give the same events in the same order, the same GPU keys and
 * the same tier in the same order.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { type BlockKey, computeBlockKeys } from '../../src/kv/blockKey.ts';
import { BlockPool } from '../../src/kv/blockPool.ts';
import { cpuTierStored, type KvEvent } from '../../src/kv/events.ts';

const BLOCK = 4;
const CPU_STORED = (blockKeys: BlockKey[]): KvEvent => cpuTierStored(blockKeys, BLOCK);

/** The pool's events as a tier kept apart turns them into its own (least recent first). */
function offloadEvents(events: KvEvent[], tier: Map<BlockKey, true>, cap: number): KvEvent[] {
  const out: KvEvent[] = [];
  for (const e of events) {
    if (e.type === 'BlockRemoved' && e.medium === undefined) {
      const stored: BlockKey[] = [];
      const evicted: BlockKey[] = [];
      for (const key of e.blockKeys) {
        if (tier.delete(key)) {
          tier.set(key, true);
          continue;
        }
        tier.set(key, true);
        if (tier.size > cap) {
          const oldest = tier.keys().next().value!;
          tier.delete(oldest);
          evicted.push(oldest);
        }
        stored.push(key);
      }
      if (stored.length > 0) out.push(CPU_STORED(stored));
      out.push(e);
      if (evicted.length > 0) out.push({ type: 'BlockRemoved', blockKeys: evicted, medium: 'CPU' });
    } else if (e.type === 'BlockStored') {
      out.push(e);
      const dropped = e.blockKeys.filter((key) => tier.delete(key));
      if (dropped.length > 0) out.push({ type: 'BlockRemoved', blockKeys: dropped, medium: 'CPU' });
    } else {
      if (e.type === 'AllBlocksCleared') tier.clear();
      out.push(e);
    }
  }
  return out;
}

/** A request's prompt: `shared` blocks of its family's prefix, then `own` blocks of its own. */
function prompt(family: number, shared: number, own: number, id: number): number[] {
  const tokens: number[] = [];
  for (let i = 0; i < shared * BLOCK; i++) tokens.push(family * 1000 + i);
  for (let i = 0; i < own * BLOCK; i++) tokens.push(1_000_000 + id * 1000 + i);
  return tokens;
}

/** Serves a request on `pool` as the scheduler does: prefix hit, allocation, store, release. */
function serve(pool: BlockPool, keys: BlockKey[], tokens: number[]): boolean {
  const hit = pool.findCachedPrefix(keys, keys.length);
  const blocks = [...hit.blockIds];
  pool.acquire(blocks);
  if (!pool.tryAllocate(keys.length - blocks.length, blocks)) {
    pool.release(blocks);
    return false;
  }
  pool.cacheFullBlocks(blocks, keys, hit.blockIds.length, keys.length, tokens, {});
  pool.release(blocks);
  return true;
}

test('a GPU eviction goes to the tier (stored before the GPU removal), the oldest making room', () => {
  const pool = new BlockPool({ numBlocks: 4, blockSize: BLOCK, cpuBlocks: 3 });
  const a = prompt(1, 0, 4, 1);
  const aKeys = computeBlockKeys(a, BLOCK);
  assert.ok(serve(pool, aKeys, a));
  pool.takeEvents();
  const b = prompt(2, 0, 4, 2);
  const bKeys = computeBlockKeys(b, BLOCK);
  assert.ok(serve(pool, bKeys, b));
  const events = pool.takeEvents();
  // Released tail first, so a's tail is evicted first; the tier keeps three, a's head leaves.
  const evicted = [aKeys[3]!, aKeys[2]!, aKeys[1]!, aKeys[0]!];
  assert.deepEqual(events.slice(0, 3), [
    CPU_STORED(evicted),
    { type: 'BlockRemoved', blockKeys: evicted },
    { type: 'BlockRemoved', blockKeys: [aKeys[3]!], medium: 'CPU' },
  ]);
  assert.deepEqual(pool.cpuTierKeys(), [aKeys[2]!, aKeys[1]!, aKeys[0]!]);
  assert.equal(pool.cachedBlocks, 4);
  assert.equal(pool.isCached(aKeys[0]!), false);
  assert.equal(pool.inCpuTier(aKeys[0]!), true);
  assert.deepEqual(
    [pool.cpuTier.storedBlocks, pool.cpuTier.evictedBlocks, pool.cpuTier.size],
    [4, 1, 3],
  );
  // The GPU holds none of a; the tier holds its first three blocks, not its fourth.
  assert.deepEqual(pool.tieredPrefix(aKeys, 4), { gpuBlocks: 0, gpuFreeBlocks: 0, cpuEnd: 3 });
  assert.deepEqual(pool.tieredPrefix(bKeys, 4), { gpuBlocks: 4, gpuFreeBlocks: 4, cpuEnd: 4 });
  assert.deepEqual(pool.findCachedPrefix(aKeys, 4).blockIds, []);
  // A load takes keys out; computing a block again takes it out too, recorded after the store.
  assert.equal(pool.takeFromCpuTier(aKeys[0]!), true);
  assert.equal(pool.takeFromCpuTier(aKeys[0]!), false);
  assert.equal(pool.cpuTier.loadedBlocks, 1);
  assert.ok(serve(pool, aKeys.slice(0, 2), a.slice(0, 2 * BLOCK)));
  const again = pool.takeEvents();
  assert.deepEqual(again.at(-1), { type: 'BlockRemoved', blockKeys: [aKeys[1]!], medium: 'CPU' });
  assert.equal(again.at(-2)!.type, 'BlockStored');
  assert.equal(pool.isCached(aKeys[1]!), true);
  assert.equal(pool.inCpuTier(aKeys[1]!), false);
  // A silent loss is the GPU's alone; a reset clears both tiers.
  pool.forgetAllSilently();
  assert.equal(pool.cachedBlocks, 0);
  assert.ok(pool.cpuTier.size > 0);
  assert.deepEqual(pool.cachedKeys(), []);
  assert.equal(pool.resetCache(), true);
  assert.equal(pool.cpuTier.size, 0);
  assert.equal(pool.inCpuTier(aKeys[2]!), false);
});

test('property: the pool with its tier = a pool without one and a tier fed by its events', () => {
  const op = fc.oneof(
    {
      weight: 8,
      arbitrary: fc.record({
        kind: fc.constant('serve' as const),
        family: fc.integer({ min: 0, max: 4 }),
        shared: fc.integer({ min: 0, max: 5 }),
        own: fc.integer({ min: 0, max: 4 }),
      }),
    },
    {
      weight: 2,
      arbitrary: fc.record({
        kind: fc.constant('load' as const),
        family: fc.integer({ min: 0, max: 4 }),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant('uncache' as const),
        family: fc.integer({ min: 0, max: 4 }),
      }),
    },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('reset' as const) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('forget' as const) }) },
  );
  fc.assert(
    fc.property(
      fc.integer({ min: 2, max: 12 }),
      fc.integer({ min: 1, max: 10 }),
      fc.array(op, { minLength: 1, maxLength: 60 }),
      (numBlocks, cap, ops) => {
        const pool = new BlockPool({ numBlocks, blockSize: BLOCK, cpuBlocks: cap });
        const plain = new BlockPool({ numBlocks, blockSize: BLOCK });
        const tier = new Map<BlockKey, true>();
        let loaded = 0;
        ops.forEach((o, id) => {
          if (o.kind === 'serve') {
            const tokens = prompt(o.family, o.shared, o.own, id);
            const keys = computeBlockKeys(tokens, BLOCK);
            assert.equal(serve(pool, keys, tokens), serve(plain, keys, tokens));
          } else if (o.kind === 'load') {
            // What the connector takes out to load: the family's prefix the tier holds.
            const keys = computeBlockKeys(prompt(o.family, 5, 0, 0), BLOCK);
            const prefix = pool.tieredPrefix(keys, keys.length);
            for (let i = prefix.gpuBlocks; i < prefix.cpuEnd; i++) {
              assert.equal(pool.takeFromCpuTier(keys[i]!), true);
              assert.equal(tier.delete(keys[i]!), true);
              loaded++;
            }
          } else if (o.kind === 'uncache') {
            const keys = computeBlockKeys(prompt(o.family, 5, 0, 0), BLOCK);
            assert.equal(pool.uncache(keys), plain.uncache(keys));
          } else if (o.kind === 'reset') {
            assert.equal(pool.resetCache(), plain.resetCache());
          } else {
            assert.equal(pool.forgetAllSilently(), plain.forgetAllSilently());
          }
          assert.deepEqual(pool.takeEvents(), offloadEvents(plain.takeEvents(), tier, cap));
          assert.deepEqual(pool.cpuTierKeys(), [...tier.keys()]);
          assert.deepEqual(
            pool.cachedKeys().sort((x, y) => x - y),
            plain.cachedKeys().sort((x, y) => x - y),
          );
          assert.equal(pool.cachedBlocks, plain.cachedBlocks);
          assert.equal(pool.freeBlocks, plain.freeBlocks);
          assert.equal(pool.cpuTier.loadedBlocks, loaded);
          assert.ok(pool.cpuTier.size <= cap);
        });
      },
    ),
    { numRuns: 300, seed: 55 },
  );
});
