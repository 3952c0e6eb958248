/**
 * extendThroughTier (src/router/index/tierMatch.ts), which walks every replica at once with one
 * lookup per block and index, against the walk it replaced: one replica at a time, each block
 * looked up per replica, the prefix going on while the block is in the GPU or the CPU index.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { BlockKey } from '../../src/kv/blockKey.ts';
import { BlockIndex } from '../../src/router/index/blockIndex.ts';
import { extendThroughTier } from '../../src/router/index/tierMatch.ts';
import { TierKeys } from '../../src/router/index/tierKeys.ts';

/** The replica-by-replica walk. */
function reference(
  gpu: BlockIndex,
  cpu: TierKeys,
  keys: readonly BlockKey[],
  ids: readonly number[],
  matched: Int32Array,
  cpuBlocks: Int32Array,
): void {
  for (const r of ids) {
    cpuBlocks[r] = 0;
    if (cpu.blockCount(r) === 0) continue;
    let i = matched[r]!;
    let onlyCpu = 0;
    for (; i < keys.length; i++) {
      if (gpu.has(keys[i]!, r)) continue;
      if (!cpu.has(keys[i]!, r)) break;
      onlyCpu++;
    }
    matched[r] = i;
    cpuBlocks[r] = onlyCpu;
  }
}

const REPLICAS = 40;
/** Where block k of the prompt lives on a replica: 0 nowhere, 1 GPU, 2 CPU, 3 both. */
const placement = fc.array(fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 24 }), {
  minLength: 1,
  maxLength: REPLICAS,
});

test('property: the all-at-once tier walk matches the replica-by-replica one', () => {
  fc.assert(
    fc.property(
      placement,
      fc.integer({ min: 0, max: 24 }),
      fc.array(fc.integer({ min: 0, max: 24 }), { minLength: REPLICAS, maxLength: REPLICAS }),
      fc.array(fc.integer({ min: 0, max: REPLICAS - 1 }), { maxLength: REPLICAS }),
      (where, promptBlocks, starts, idList) => {
        const keys = Array.from({ length: promptBlocks }, (_, k) => 2 ** 40 + k * 977);
        const gpu = new BlockIndex(REPLICAS);
        const cpu = new TierKeys(REPLICAS);
        where.forEach((blocks, r) => {
          blocks.forEach((w, k) => {
            if (k >= keys.length) return;
            if (w & 1) gpu.add(keys[k]!, r);
            if (w & 2) cpu.add(keys[k]!, r);
          });
        });
        const ids = [...new Set(idList)];
        // GPU walk results as the router has them: any start, at most the prompt.
        const matched = Int32Array.from(starts, (s) => Math.min(s, keys.length));
        const want = { matched: matched.slice(), cpu: new Int32Array(REPLICAS).fill(-1) };
        const got = { matched: matched.slice(), cpu: new Int32Array(REPLICAS).fill(-1) };
        reference(gpu, cpu, keys, ids, want.matched, want.cpu);
        extendThroughTier(gpu, cpu, keys, ids, got.matched, got.cpu);
        assert.deepEqual(got.matched, want.matched);
        assert.deepEqual(got.cpu, want.cpu);
      },
    ),
    { numRuns: 500, seed: 55 },
  );
});

test('extendThroughTier: a CPU-only block carries the prefix to the GPU blocks after it', () => {
  const keys = [11, 12, 13, 14, 15];
  const gpu = new BlockIndex(2);
  const cpu = new TierKeys(2);
  for (const k of [11, 13, 14]) gpu.add(k, 0);
  cpu.add(12, 0);
  cpu.add(99, 1); // replica 1 has a tier, not this prompt's blocks
  const matched = Int32Array.from([1, 0]);
  const cpuBlocks = new Int32Array(2);
  extendThroughTier(gpu, cpu, keys, [0, 1], matched, cpuBlocks);
  assert.deepEqual([...matched], [4, 0]);
  assert.deepEqual([...cpuBlocks], [1, 0]);
});
