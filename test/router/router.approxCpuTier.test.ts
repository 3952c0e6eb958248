/**
 * The approximate index told a replica's CPU tier size: blocks aged out of its modelled GPU
 * capacity go to a modelled LRU tier of that size, are credited as CPU hits (between a GPU hit
 * and a miss) and fall out when the tier is full; a replica never told stays GPU-only.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { computeBlockKeys } from '../../src/kv/blockKey.ts';
import { ApproxIndex } from '../../src/router/index/approxIndex.ts';
import { Router } from '../../src/router/index.ts';
import { cpuReloadTokens } from '../../src/router/policies/cpuHitCredit.ts';
import { BLOCK, tokens } from '../support/routing.ts';

const request = (id: string, toks: number[]) => ({
  id,
  blockKeys: computeBlockKeys(toks, BLOCK),
  promptTokens: toks.length,
  blockSize: BLOCK,
});

test('blocks aged out of the GPU record enter the CPU tier, least recent first out', () => {
  const index = new ApproxIndex(1, 4);
  index.setCpuCapacity(0, 3);
  index.recordRoute(0, [1, 2, 3, 4]);
  assert.equal(index.blockCount(0), 4);
  assert.equal(index.cpuBlockCount(0), 0);
  // Keys are touched last first: 9 is the least recent of the route, 1..4 older still.
  index.recordRoute(0, [5, 6, 7, 8, 9]);
  // LRU order, least recent first: 4 3 2 1 9 8 7 6 5. The GPU record keeps 8 7 6 5; 4 3 2 1 9
  // age out in that order into the tier, which keeps its three most recent: 2 1 9.
  assert.deepEqual(
    [5, 6, 7, 8].map((k) => index.blocks.has(k, 0)),
    [true, true, true, true],
  );
  assert.equal(index.cpuBlockCount(0), 3);
  const inCpu = [1, 2, 3, 4, 5, 6, 7, 8, 9].filter((k) => index.cpuBlocks.has(k, 0));
  assert.deepEqual(inCpu, [1, 2, 9]);
  // A route through a CPU block reloads it: back on the GPU record, out of the tier.
  const reloaded = inCpu[0]!;
  index.recordRoute(0, [reloaded]);
  assert.equal(index.blocks.has(reloaded, 0), true);
  assert.equal(index.cpuBlocks.has(reloaded, 0), false);
});

test('without a size, or with 0, the index forgets as before: GPU only', () => {
  const index = new ApproxIndex(2, 4);
  index.setCpuCapacity(1, 0);
  for (const r of [0, 1]) {
    index.recordRoute(r, [1, 2, 3, 4, 5, 6]);
    assert.equal(index.blockCount(r), 4);
    assert.equal(index.cpuBlockCount(r), 0);
  }
  assert.equal(index.cpuBlocks.size, 0);
});

test("a smaller size drops the tier's least recent blocks; a bad size is refused", () => {
  const index = new ApproxIndex(1, 2);
  index.setCpuCapacity(0, 10);
  index.recordRoute(0, [1, 2, 3, 4, 5, 6]);
  assert.equal(index.cpuBlockCount(0), 4);
  index.setCpuCapacity(0, 1);
  assert.equal(index.cpuBlockCount(0), 1);
  assert.throws(() => index.setCpuCapacity(0, -1), RangeError);
  assert.throws(() => index.setCpuCapacity(0, 1.5), RangeError);
  index.clearReplica(0);
  assert.equal(index.cpuBlockCount(0), 0);
  assert.equal(index.blockCount(0), 0);
});

test("router: a prefix pushed out of its owner's GPU record is still its owner's, as a CPU hit", () => {
  // Capacity 400 blocks per replica: a 6,000-token prefix (375 blocks) fits; the flood pushes it out.
  const run = (cpuKvBlocks: readonly number[] | undefined) => {
    const approxTiers = cpuKvBlocks?.map((b) => ({ cpuKvBlocks: b }));
    const router = new Router({
      replicas: ['a', 'b'],
      policy: 'cost',
      indexMode: 'approx',
      approxCapacityBlocks: 400,
      explain: true,
      ...(approxTiers && { approxTiers }),
    });
    const prefix = tokens(1, 6_000);
    const first = router.route(request('p', [...prefix, ...tokens(2, 16)]), 0);
    router.onFinished('p', 0);
    // Two unrelated 400-block prompts to the same replica: the first ages the prefix out of its
    // GPU record, the second the first.
    const other = first.replica === 'a' ? 'b' : 'a';
    for (let i = 0; i < 2; i++) {
      router.route({ ...request(`f${i}`, tokens(10 + i, 6_400)), avoid: [other] }, 0);
      router.onFinished(`f${i}`, 0);
    }
    const again = router.route(request('q', [...prefix, ...tokens(3, 16)]), 0);
    return { router, first, again };
  };
  const gpuOnly = run(undefined);
  assert.equal(gpuOnly.again.cachedTokens, 0, 'GPU-only: the prefix is forgotten');
  const tiered = run([1_000, 1_000]);
  const owner = tiered.first.replica;
  assert.equal(tiered.again.replica, owner);
  assert.equal(tiered.again.cachedTokens, 6_000);
  const snap = tiered.router.snapshot().replicas.find((r) => r.name === owner)!;
  assert.ok(snap.indexedBlocksByMedium.CPU > 0, JSON.stringify(snap.indexedBlocksByMedium));
  // Credited at its reload time: the owner's score is the reload, not a full prefill.
  const s = tiered.again.scores!;
  const other = owner === 'a' ? 'b' : 'a';
  assert.ok(s[owner]! < s[other]!, JSON.stringify(s));
  assert.ok(s[owner]! >= cpuReloadTokens(6_000) - 1e-6, JSON.stringify(s));
  // A tier of 500 blocks: the prefix (376 blocks, its unique tail least recent) then the first
  // prompt's 400 make 776; the 276 least recent fall out, the prefix's first 100 blocks stay.
  const small = run([500, 500]);
  assert.equal(small.again.replica, small.first.replica);
  assert.equal(small.again.cachedTokens, 100 * BLOCK);
});

test("a replica's GPU record sized to its pool forgets beyond it; others keep the default", () => {
  const router = new Router({
    replicas: ['small', 'big'],
    policy: 'cost',
    indexMode: 'approx',
    approxCapacityBlocks: 1_000,
    approxTiers: [{ kvBlocks: 64, cpuKvBlocks: 128 }],
  });
  for (const name of ['small', 'big']) {
    const other = name === 'small' ? 'big' : 'small';
    router.route({ ...request(`x-${name}`, tokens(7, 3_200)), avoid: [other] }, 0);
  }
  const [small, big] = router.snapshot().replicas;
  assert.deepEqual(small!.indexedBlocksByMedium, { GPU: 64, CPU: 128 });
  assert.deepEqual(big!.indexedBlocksByMedium, { GPU: 200, CPU: 0 });
});

test('events mode ignores the size: the CPU-medium events are its feed', () => {
  const router = new Router({
    replicas: ['a'],
    policy: 'cost',
    approxTiers: [{ cpuKvBlocks: 100 }],
  });
  router.route(request('x', tokens(1, 3_200)), 0);
  assert.deepEqual(router.snapshot().replicas[0]!.indexedBlocksByMedium, { GPU: 0, CPU: 0 });
});

/** Random routes of keys from a small alphabet to a few replicas with random tier sizes. */
const scenario = fc.record({
  gpu: fc.integer({ min: 1, max: 12 }),
  cpu: fc.array(fc.integer({ min: 0, max: 10 }), { minLength: 3, maxLength: 3 }),
  ops: fc.array(
    fc.oneof(
      fc.record({
        kind: fc.constant('route' as const),
        replica: fc.integer({ min: 0, max: 2 }),
        keys: fc.uniqueArray(fc.integer({ min: 1, max: 40 }), { maxLength: 16 }),
      }),
      fc.record({
        kind: fc.constant('resize' as const),
        replica: fc.integer({ min: 0, max: 2 }),
        blocks: fc.integer({ min: 0, max: 10 }),
      }),
      fc.record({ kind: fc.constant('clear' as const), replica: fc.integer({ min: 0, max: 2 }) }),
    ),
    { maxLength: 60 },
  ),
});

test('property: a block is in at most one modelled tier; neither tier exceeds its size', () => {
  fc.assert(
    fc.property(scenario, ({ gpu, cpu, ops }) => {
      const index = new ApproxIndex(3, gpu);
      const size = [...cpu];
      for (const [r, b] of cpu.entries()) index.setCpuCapacity(r, b);
      for (const op of ops) {
        if (op.kind === 'route') index.recordRoute(op.replica, op.keys);
        else if (op.kind === 'resize') {
          index.setCpuCapacity(op.replica, op.blocks);
          size[op.replica] = op.blocks;
        } else index.clearReplica(op.replica);
        for (let r = 0; r < 3; r++) {
          assert.ok(index.blockCount(r) <= gpu);
          assert.ok(index.cpuBlockCount(r) <= size[r]!);
          let inGpu = 0;
          let inCpu = 0;
          for (let k = 1; k <= 40; k++) {
            const g = index.blocks.has(k, r);
            const c = index.cpuBlocks.has(k, r);
            assert.ok(!(g && c), `key ${k} in both tiers of replica ${r}`);
            if (g) inGpu++;
            if (c) inCpu++;
          }
          assert.equal(inGpu, index.blockCount(r));
          assert.equal(inCpu, index.cpuBlockCount(r));
        }
        if (op.kind === 'route' && op.keys.length <= gpu) {
          // A route's own keys are all on the GPU record right after it.
          for (const k of op.keys) assert.ok(index.blocks.has(k, op.replica));
        }
      }
    }),
    { numRuns: 300 },
  );
});

test('property: with the tier, nothing is forgotten that fits in GPU + CPU', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 8 }),
      fc.integer({ min: 0, max: 8 }),
      fc.uniqueArray(fc.integer({ min: 1, max: 1000 }), { maxLength: 16 }),
      (gpu, cpu, keys) => {
        const index = new ApproxIndex(1, gpu);
        index.setCpuCapacity(0, cpu);
        // One key a route: each older key ages out one at a time.
        for (const k of keys) index.recordRoute(0, [k]);
        const kept = keys.filter((k) => index.blocks.has(k, 0) || index.cpuBlocks.has(k, 0));
        assert.deepEqual(kept, keys.slice(Math.max(0, keys.length - gpu - cpu)));
      },
    ),
    { numRuns: 200 },
  );
});
