/**
 * The block-key functions against their version before the 16-token fast path, kept in
 * test/support as the model: the keys are the wire's (published as vLLM hashes, carried in
 * events and snapshots), so every key of every chain, salt, LoRA name, block size and starting
 * block must stay the same, whatever array type holds the tokens.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import {
  chainBlockKeys,
  computeBlockKeys,
  extendBlockKey,
  extendBlockKeys,
} from '../../src/kv/blockKey.ts';
import * as reference from '../support/blockKeyReference.ts';

/** Token ids as a tokenizer gives them: small and large ids, 0, and the 32-bit edges. */
const token = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 0, max: 200_000 }) },
  fc.constantFrom(0, 1, 2 ** 31 - 1, 2 ** 32 - 1),
  fc.integer({ min: 0, max: 2 ** 32 - 1 }),
);
/** Mostly the default 16, and sizes around it and around the lanes' four. */
const blockSize = fc.oneof(
  { weight: 3, arbitrary: fc.constant(16) },
  fc.integer({ min: 1, max: 40 }),
  fc.constantFrom(32, 64),
);
const scope = fc.record({
  cacheSalt: fc.option(fc.string({ maxLength: 6 }), { nil: undefined }),
  loraName: fc.option(fc.string({ maxLength: 6 }), { nil: undefined }),
});

test('computeBlockKeys gives the reference keys for random tokens, sizes and scopes', () => {
  fc.assert(
    fc.property(
      fc.array(token, { maxLength: 700, size: 'max' }),
      blockSize,
      scope,
      fc.option(fc.nat(50), { nil: undefined }),
      (tokens, size, keyScope, limit) => {
        const want = reference.computeBlockKeys(tokens, size, keyScope, limit);
        assert.deepEqual(computeBlockKeys(tokens, size, keyScope, limit), want);
        // The same ids in the typed arrays the engine and the tokenizer hand over.
        assert.deepEqual(computeBlockKeys(Uint32Array.from(tokens), size, keyScope, limit), want);
      },
    ),
    { numRuns: 400 },
  );
});

test('extendBlockKeys and extendBlockKey give the reference keys from any block on', () => {
  fc.assert(
    fc.property(
      fc.array(token, { maxLength: 400, size: 'max' }),
      blockSize,
      scope,
      fc.nat(30),
      (tokens, size, keyScope, from) => {
        const all = reference.computeBlockKeys(tokens, size, keyScope);
        const fromBlock = Math.min(from, all.length);
        const parent = fromBlock === 0 ? null : all[fromBlock - 1]!;
        const head = all.slice(0, fromBlock);
        const got = extendBlockKeys(tokens, size, fromBlock, parent, [...head], keyScope);
        const want = reference.extendBlockKeys(
          tokens,
          size,
          fromBlock,
          parent,
          [...head],
          keyScope,
        );
        assert.deepEqual(got, want);
        assert.deepEqual(got, all);
        if (fromBlock < all.length) {
          const block = tokens.slice(fromBlock * size, (fromBlock + 1) * size);
          assert.equal(extendBlockKey(parent, block, keyScope), all[fromBlock]);
        }
      },
    ),
    { numRuns: 400 },
  );
});

test('chainBlockKeys gives the reference keys from any parent, up to any limit', () => {
  fc.assert(
    fc.property(
      fc.array(token, { maxLength: 400, size: 'max' }),
      blockSize,
      scope,
      fc.nat(30),
      fc.option(fc.nat(30), { nil: undefined }),
      (tokens, size, keyScope, from, limit) => {
        // The parent: a block of another chain (or none), its children keyed on `tokens`.
        const prefix = reference.computeBlockKeys(tokens.slice().reverse(), size, keyScope);
        const parent = from === 0 || prefix.length === 0 ? null : prefix[from % prefix.length]!;
        const want = reference.extendBlockKeys(tokens, size, 0, parent, [], keyScope, limit);
        const got = chainBlockKeys(tokens, size, parent, keyScope, limit);
        assert.deepEqual([...got], want);
        assert.equal(got.length, want.length);
      },
    ),
    { numRuns: 400 },
  );
});

test('an 8,000-token prompt in 16-token blocks keys as the reference does', () => {
  let x = 12345;
  const tokens = Array.from({ length: 8_000 }, () => {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    return x % 128_000;
  });
  assert.deepEqual(computeBlockKeys(tokens, 16), reference.computeBlockKeys(tokens, 16));
  assert.deepEqual(
    computeBlockKeys(tokens, 16, { cacheSalt: 'tenant', loraName: 'sql' }),
    reference.computeBlockKeys(tokens, 16, { cacheSalt: 'tenant', loraName: 'sql' }),
  );
});
