/** BlockPool.uncache: a runtime's lost KV leaves the cache with one BlockRemoved; held blocks stay. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { computeBlockKeys } from '../../src/kv/blockKey.ts';
import { BlockPool } from '../../src/kv/blockPool.ts';

test('uncache drops free cached keys (one BlockRemoved) and leaves keys in use alone', () => {
  const pool = new BlockPool({ numBlocks: 8, blockSize: 4 });
  const tokensA = Array.from({ length: 12 }, (_, i) => i + 1);
  const tokensB = Array.from({ length: 8 }, (_, i) => i + 100);
  const keysA = computeBlockKeys(tokensA, 4);
  const keysB = computeBlockKeys(tokensB, 4);
  const a: number[] = [];
  const b: number[] = [];
  assert.ok(pool.tryAllocate(3, a) && pool.tryAllocate(2, b));
  pool.cacheFullBlocks(a, keysA, 0, 3, tokensA, {});
  pool.cacheFullBlocks(b, keysB, 0, 2, tokensB, {});
  pool.release(a); // A is free but cached; B is still held
  pool.takeEvents();
  assert.equal(pool.uncache([keysA[1]!, keysA[2]!, keysB[0]!, 12345]), 2);
  assert.deepEqual(pool.takeEvents(), [
    { type: 'BlockRemoved', blockKeys: [keysA[1]!, keysA[2]!] },
  ]);
  assert.deepEqual(pool.findCachedPrefix(keysA, 3).blockIds.length, 1);
  assert.ok(pool.isCached(keysB[0]!), 'a held block keeps its key');
  assert.equal(pool.cachedBlocks, 3);
  assert.equal(pool.freeBlocks, 6);
  // The uncached blocks hold nothing now: they are reused first, evicting no key.
  const next: number[] = [];
  assert.ok(pool.tryAllocate(2, next));
  assert.deepEqual(pool.takeEvents(), []);
  assert.equal(pool.uncache([]), 0);
  assert.deepEqual(pool.takeEvents(), []);
});
