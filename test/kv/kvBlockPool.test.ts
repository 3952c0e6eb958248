import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { computeBlockKeys } from '../../src/kv/blockKey.ts';
import { BlockPool } from '../../src/kv/blockPool.ts';
import type { BlockStored } from '../../src/kv/events.ts';
import { FreeBlockQueue } from '../../src/kv/freeBlockQueue.ts';
import { applyEvents, assertPoolConsistent } from '../support/schedulerHarness.ts';

const tokens = (n: number, start = 0) => Array.from({ length: n }, (_, i) => start + i);

test('free queue: push, pop and remove from the middle keep the order', () => {
  const q = new FreeBlockQueue(6);
  for (const b of [3, 1, 4, 0]) q.pushBack(b);
  q.pushFront(5);
  assert.deepEqual(q.toArray(), [5, 3, 1, 4, 0]);
  q.remove(1);
  assert.equal(q.has(1), false);
  assert.equal(q.popFront(), 5);
  assert.deepEqual(q.toArray(), [3, 4, 0]);
  assert.equal(q.size, 3);
  assert.throws(() => q.pushBack(4), {
    name: 'Error',
    message: 'block 4 is already in the free list',
  });
  assert.throws(() => q.remove(1), { name: 'Error', message: 'block 1 is not in the free list' });
  q.remove(0);
  q.remove(3);
  assert.equal(q.popFront(), 4);
  assert.equal(q.popFront(), -1);
});

test('a cached prefix is found, pinned, and capped by maxBlocks', () => {
  const pool = new BlockPool({ numBlocks: 8, blockSize: 4 });
  const prompt = tokens(12);
  const keys = computeBlockKeys(prompt, 4);
  const blocks: number[] = [];
  assert.ok(pool.tryAllocate(3, blocks));
  pool.cacheFullBlocks(blocks, keys, 0, 3, prompt, {});
  assert.deepEqual(pool.findCachedPrefix(keys, 3), { blockIds: blocks, freeBlocks: 0 });
  assert.equal(pool.findCachedPrefix(keys, 2).blockIds.length, 2);
  pool.release(blocks);
  assert.deepEqual(pool.findCachedPrefix(keys, 3), { blockIds: blocks, freeBlocks: 3 });
  const other = computeBlockKeys([9, ...prompt.slice(1)], 4);
  assert.equal(pool.findCachedPrefix(other, 3).blockIds.length, 0);
  const hit = pool.findCachedPrefix(keys, 2);
  pool.acquire(hit.blockIds);
  assert.equal(pool.freeBlocks, 6);
  assert.equal(pool.refCount(blocks[0]!), 1);
  pool.acquire(hit.blockIds);
  assert.equal(pool.refCount(blocks[0]!), 2);
  pool.release(hit.blockIds);
  pool.release(hit.blockIds);
  assertPoolConsistent(pool);
});

test('eviction is LRU, a released request tail first; uncached blocks are reused before any', () => {
  const pool = new BlockPool({ numBlocks: 6, blockSize: 2 });
  const prompt = tokens(8);
  const keys = computeBlockKeys(prompt, 2);
  const a: number[] = [];
  pool.tryAllocate(5, a); // 4 full prompt blocks + 1 for output
  pool.cacheFullBlocks(a, keys, 0, 4, prompt, {});
  pool.takeEvents();
  pool.release(a);
  // The untouched block and A's uncached output block come first, then A's tail to head.
  assert.deepEqual(pool.freeOrder(), [a[4], 5, a[3], a[2], a[1], a[0]]);
  const b: number[] = [];
  pool.tryAllocate(3, b);
  assert.deepEqual(pool.takeEvents(), [{ type: 'BlockRemoved', blockKeys: [keys[3]] }]);
  // A's first three blocks are still cached.
  assert.equal(pool.findCachedPrefix(keys, 4).blockIds.length, 3);
});

test('tryAllocate refuses without changing anything when too few blocks are free', () => {
  const pool = new BlockPool({ numBlocks: 3, blockSize: 1 });
  const out: number[] = [];
  assert.ok(pool.tryAllocate(2, out));
  assert.equal(pool.tryAllocate(2, out), false);
  assert.deepEqual(out.length, 2);
  assert.equal(pool.freeBlocks, 1);
});

test('BlockStored carries parent key, token ids, block size, salt and LoRA; duplicates are skipped', () => {
  const pool = new BlockPool({ numBlocks: 10, blockSize: 3 });
  const prompt = tokens(9, 100);
  const scope = { cacheSalt: 'tenant-a', loraName: 'sql' };
  const keys = computeBlockKeys(prompt, 3, scope);
  const a: number[] = [];
  pool.tryAllocate(3, a);
  pool.cacheFullBlocks(a, keys, 0, 1, prompt, scope);
  pool.cacheFullBlocks(a, keys, 1, 3, prompt, scope);
  const [first, second] = pool.takeEvents() as BlockStored[];
  assert.deepEqual(first, {
    type: 'BlockStored',
    blockKeys: [keys[0]],
    parentKey: null,
    tokenIds: [100, 101, 102],
    blockSize: 3,
    loraName: 'sql',
    cacheSalt: 'tenant-a',
  });
  assert.deepEqual(second!.blockKeys, [keys[1], keys[2]]);
  assert.equal(second!.parentKey, keys[0]);
  assert.deepEqual(second!.tokenIds, tokens(6, 103));
  // A second copy of the same blocks computed concurrently stays uncached: no event.
  const b: number[] = [];
  pool.tryAllocate(3, b);
  pool.cacheFullBlocks(b, keys, 0, 3, prompt, scope);
  assert.deepEqual(pool.takeEvents(), []);
  assert.equal(pool.keyOf(b[0]!), null);
  assert.equal(pool.cachedBlocks, 3);
});

test('resetCache clears every key only when no block is in use', () => {
  const pool = new BlockPool({ numBlocks: 4, blockSize: 1 });
  const a: number[] = [];
  pool.tryAllocate(2, a);
  pool.cacheFullBlocks(a, [11, 12], 0, 2, [1, 2], {});
  assert.equal(pool.resetCache(), false);
  pool.release(a);
  pool.takeEvents();
  assert.equal(pool.resetCache(), true);
  assert.deepEqual(pool.takeEvents(), [{ type: 'AllBlocksCleared' }]);
  assert.equal(pool.cachedBlocks, 0);
  assert.equal(pool.findCachedPrefix([11, 12], 2).blockIds.length, 0);
  assert.throws(() => pool.release(a), {
    name: 'Error',
    message: /^block \d+ released more often than acquired$/,
  });
});

test('a pool without caching finds nothing and records no events', () => {
  const pool = new BlockPool({ numBlocks: 4, blockSize: 1, enableCaching: false });
  const a: number[] = [];
  pool.tryAllocate(2, a);
  pool.cacheFullBlocks(a, [1, 2], 0, 2, [1, 2], {});
  assert.equal(pool.findCachedPrefix([1, 2], 2).blockIds.length, 0);
  assert.deepEqual(pool.takeEvents(), []);
});

type Op =
  | { kind: 'take'; prompt: number; blocks: number; extra: number }
  | { kind: 'release'; pick: number }
  | { kind: 'reset' };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant('take' as const),
    prompt: fc.integer({ min: 0, max: 4 }),
    blocks: fc.integer({ min: 1, max: 10 }),
    extra: fc.integer({ min: 0, max: 3 }),
  }),
  fc.record({ kind: fc.constant('release' as const), pick: fc.nat() }),
  fc.constant({ kind: 'reset' as const }),
);

test('random op sequences: ref counts, free + used = total, events replay to the cached set', () => {
  const blockSize = 2;
  // Five prompts of 10 blocks; prompts 0..2 share their first blocks, 3 is salted.
  const prompts = [0, 1, 2, 3, 4].map((p) =>
    tokens(20).map((t, i) => (i < 6 && p < 3 ? t : t + 1000 * p)),
  );
  const scopes = prompts.map((_, p) => (p === 3 ? { cacheSalt: 'x' } : {}));
  const keys = prompts.map((tok, p) => computeBlockKeys(tok, blockSize, scopes[p]));
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 24 }), fc.array(op, { maxLength: 60 }), (size, ops) => {
      const pool = new BlockPool({ numBlocks: size, blockSize });
      const owners: number[][] = [];
      const replayed = new Set<number>();
      for (const o of ops) {
        if (o.kind === 'take') {
          const hit = pool.findCachedPrefix(keys[o.prompt]!, o.blocks);
          const fresh = o.blocks - hit.blockIds.length + o.extra;
          if (pool.freeBlocks < hit.freeBlocks + fresh) continue;
          pool.acquire(hit.blockIds);
          const ids = [...hit.blockIds];
          assert.ok(pool.tryAllocate(fresh, ids));
          pool.cacheFullBlocks(
            ids,
            keys[o.prompt]!,
            hit.blockIds.length,
            o.blocks,
            prompts[o.prompt]!,
            scopes[o.prompt]!,
          );
          owners.push(ids);
        } else if (o.kind === 'release') {
          if (owners.length === 0) continue;
          const [ids] = owners.splice(o.pick % owners.length, 1);
          pool.release(ids!);
        } else {
          assert.equal(pool.resetCache(), owners.length === 0);
        }
        applyEvents(replayed, pool.takeEvents());
        assertPoolConsistent(pool);
        const refs = new Map<number, number>();
        for (const ids of owners) for (const b of ids) refs.set(b, (refs.get(b) ?? 0) + 1);
        for (let b = 0; b < size; b++) assert.equal(pool.refCount(b), refs.get(b) ?? 0);
        assert.deepEqual(new Set(pool.cachedKeys()), replayed);
        for (const key of pool.cachedKeys()) {
          const [block] = pool.findCachedPrefix([key], 1).blockIds;
          assert.equal(pool.keyOf(block!), key);
        }
      }
      for (const ids of owners) pool.release(ids);
      assert.equal(pool.freeBlocks, size);
      assertPoolConsistent(pool);
    }),
    { numRuns: 3000 },
  );
});
