import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { computeBlockKeys, extendBlockKey, toWireHash } from '../src/kv/blockKey.ts';

test('chaining one block at a time gives the same keys as the batch function', () => {
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: 0, max: 200_000 }), { maxLength: 200 }),
      fc.integer({ min: 1, max: 32 }),
      fc.option(fc.string(), { nil: undefined }),
      (tokens, blockSize, cacheSalt) => {
        const keys = computeBlockKeys(tokens, blockSize, { cacheSalt });
        assert.equal(keys.length, Math.floor(tokens.length / blockSize));
        let parent: number | null = null;
        keys.forEach((key, b) => {
          const k = extendBlockKey(parent, tokens.slice(b * blockSize, (b + 1) * blockSize), {
            cacheSalt,
          });
          assert.equal(k, key);
          assert.ok(Number.isSafeInteger(key) && key >= 0);
          parent = k;
        });
      },
    ),
    { numRuns: 500 },
  );
});

test('equal prefixes share keys, a different block changes every key after it', () => {
  const a = Array.from({ length: 64 }, (_, i) => i);
  const b = [...a];
  b[40] = 9999;
  const ka = computeBlockKeys(a, 16);
  const kb = computeBlockKeys(b, 16);
  assert.deepEqual(ka.slice(0, 2), kb.slice(0, 2));
  assert.notEqual(ka[2], kb[2]);
  assert.notEqual(ka[3], kb[3]);
});

test('cache_salt and LoRA name separate otherwise equal prompts', () => {
  const tokens = Array.from({ length: 48 }, (_, i) => i * 7);
  const plain = computeBlockKeys(tokens, 16);
  const salted = computeBlockKeys(tokens, 16, { cacheSalt: 'tenant-a' });
  const other = computeBlockKeys(tokens, 16, { cacheSalt: 'tenant-b' });
  const lora = computeBlockKeys(tokens, 16, { loraName: 'sql-adapter' });
  for (const k of salted) assert.ok(!plain.includes(k) && !other.includes(k) && !lora.includes(k));
});

test('wire hashes are 64-bit, injective and mostly above 2^53', () => {
  const keys = computeBlockKeys(
    Array.from({ length: 16 * 1000 }, (_, i) => i),
    16,
  );
  const wire = keys.map(toWireHash);
  assert.equal(new Set(wire).size, keys.length);
  for (const w of wire) assert.ok(w >= 0n && w < 1n << 64n);
  assert.ok(wire.filter((w) => w > 1n << 53n).length > 900);
  assert.equal(new Set(keys).size, keys.length);
});
