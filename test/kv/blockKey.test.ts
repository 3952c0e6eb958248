import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import {
  computeBlockKeys,
  extendBlockKey,
  extendBlockKeys,
  toWireHash,
} from '../../src/kv/blockKey.ts';

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

test('extending a known prefix gives the keys of the whole prompt', () => {
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: 0, max: 200_000 }), { maxLength: 300 }),
      fc.integer({ min: 1, max: 16 }),
      fc.nat(),
      fc.option(fc.string(), { nil: undefined }),
      (tokens, blockSize, cut, cacheSalt) => {
        const whole = computeBlockKeys(Int32Array.from(tokens), blockSize, { cacheSalt });
        const fromBlock = whole.length === 0 ? 0 : cut % (whole.length + 1);
        const known = whole.slice(0, fromBlock);
        const parent = fromBlock === 0 ? null : known[fromBlock - 1]!;
        assert.deepEqual(
          extendBlockKeys(tokens, blockSize, fromBlock, parent, known, { cacheSalt }),
          whole,
        );
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

test('keys spread: no collisions over random blocks, one-token edits or reorderings', () => {
  let seed = 7;
  const next = (n: number): number => {
    seed = (Math.imul(seed, 1103515245) + 12345) | 0;
    return (seed >>> 8) % n;
  };
  const keys = new Set<number>();
  for (let n = 0; n < 200_000; n++) {
    const block = Array.from({ length: 16 }, () => next(128_000));
    keys.add(extendBlockKey(n % 2 === 0 ? null : n * 7919, block));
  }
  assert.equal(keys.size, 200_000);

  // Every block that differs from `base` in one token, or by swapping two tokens, gets its own
  // key (lanes take every fourth token, so this also covers edits within one lane).
  const base = Array.from({ length: 16 }, () => next(1_000));
  const edits = new Map<string, number>();
  for (let p = 0; p < 16; p++) {
    for (let v = 0; v < 300; v++) {
      const block = [...base];
      block[p] = v;
      edits.set(block.join(), extendBlockKey(null, block));
    }
    for (let q = p + 1; q < 16; q++) {
      const block = [...base];
      [block[p], block[q]] = [block[q]!, block[p]!];
      edits.set(block.join(), extendBlockKey(null, block));
    }
  }
  assert.equal(new Set(edits.values()).size, edits.size);
});

test('block length is part of the key', () => {
  const zeros = (n: number): number[] => new Array<number>(n).fill(0);
  const keys = [1, 2, 3, 4, 5, 15, 16, 17, 32].map((n) => extendBlockKey(null, zeros(n)));
  assert.equal(new Set(keys).size, keys.length);
});
