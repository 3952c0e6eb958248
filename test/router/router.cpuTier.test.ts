/**
 * The router's CPU tier: events with medium "CPU" go to the replica's CPU tier in the index, a
 * prefix is matched through either tier, and `cost` / `delay-cost` credit a CPU hit at its reload
 * time: between a GPU hit and a miss.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { computeBlockKeys } from '../../src/kv/blockKey.ts';
import { cpuTierStored, type KvEvent } from '../../src/kv/events.ts';
import {
  DEFAULT_CPU_RELOAD_US_PER_TOKEN,
  DEFAULT_PREFILL_US_PER_TOKEN,
} from '../../src/router/defaults.ts';
import { Router } from '../../src/router/index.ts';
import { cpuReloadTokens } from '../../src/router/policies/cpuHitCredit.ts';
import { BLOCK, tokens } from '../support/routing.ts';

const toks = tokens(3, 6_000 + 1);
const keys = computeBlockKeys(toks, BLOCK);
const cpuStore = (blockKeys: number[]): KvEvent => cpuTierStored(blockKeys, BLOCK);
const gpuStore = (blockKeys: number[], from = 0): KvEvent => ({
  type: 'BlockStored',
  blockKeys,
  parentKey: from === 0 ? null : keys[from - 1]!,
  tokenIds: toks.slice(from * BLOCK, (from + blockKeys.length) * BLOCK),
  blockSize: BLOCK,
  loraName: null,
  cacheSalt: null,
});

for (const policy of ['cost', 'delay-cost'] as const) {
  test(`${policy}: a CPU hit scores between a GPU hit and a miss`, () => {
    const router = new Router({ replicas: ['gpu', 'cpu', 'cold'], policy, explain: true });
    router.applyEvents('gpu', [gpuStore(keys)], 0);
    router.applyEvents('cpu', [cpuStore(keys)], 0);
    const d = router.route(
      { id: 'x', blockKeys: keys, promptTokens: toks.length, blockSize: BLOCK },
      0,
    );
    assert.equal(d.replica, 'gpu');
    const s = d.scores!;
    assert.ok(s.gpu! < s.cpu! && s.cpu! < s.cold!, JSON.stringify(s));
    // The CPU hit costs its reload: 6,000 tokens x 5.2 / 71.3 = 438 tokens, not 6,000.
    const reload = cpuReloadTokens(6_000);
    const scale = policy === 'cost' ? 1 : DEFAULT_PREFILL_US_PER_TOKEN / 1000;
    assert.ok(Math.abs(s.cpu! - s.gpu! - reload * scale) < 1e-6 * scale * 6_000, JSON.stringify(s));
  });
}

test('cost: the CPU owner wins once the GPU owner queues more than the reload saves', () => {
  const router = new Router({ replicas: ['gpu', 'cpu'], policy: 'cost' });
  router.applyEvents('gpu', [gpuStore(keys)], 0);
  router.applyEvents('cpu', [cpuStore(keys)], 0);
  const reload = cpuReloadTokens(6_000);
  // A cold request of reload + 100 tokens queued on the GPU owner.
  const cold = tokens(99, Math.ceil(reload) + 100);
  const busy = router.route(
    {
      id: 'busy',
      blockKeys: computeBlockKeys(cold, BLOCK),
      promptTokens: cold.length,
      blockSize: BLOCK,
      avoid: ['cpu'],
    },
    0,
  );
  assert.equal(busy.replica, 'gpu');
  const d = router.route(
    { id: 'x', blockKeys: keys, promptTokens: toks.length, blockSize: BLOCK },
    0,
  );
  assert.equal(d.replica, 'cpu');
  assert.equal(d.cachedTokens, 6_000);
});

test('the prefix runs through both tiers: GPU head, CPU tail; a gap in both ends it', () => {
  const router = new Router({ replicas: ['a'], policy: 'cost' });
  router.applyEvents('a', [gpuStore(keys.slice(0, 100)), cpuStore(keys.slice(100, 300))], 0);
  const route = (id: string) =>
    router.route({ id, blockKeys: keys, promptTokens: toks.length, blockSize: BLOCK }, 0);
  assert.equal(route('x').cachedTokens, 300 * BLOCK);
  router.onFinished('x', 0);
  router.applyEvents('a', [{ type: 'BlockRemoved', blockKeys: [keys[200]!], medium: 'CPU' }], 0);
  assert.equal(route('y').cachedTokens, 200 * BLOCK);
  assert.deepEqual(router.snapshot().replicas[0]!.indexedBlocksByMedium, { GPU: 100, CPU: 199 });
  router.applyEvents('a', [{ type: 'AllBlocksCleared' }], 0);
  assert.deepEqual(router.snapshot().replicas[0]!.indexedBlocksByMedium, { GPU: 0, CPU: 0 });
});

test('the approximate index stays GPU-only: CPU events are not its feed', () => {
  const router = new Router({ replicas: ['a'], policy: 'cost', indexMode: 'approx' });
  router.applyEvents('a', [cpuStore(keys)], 0);
  assert.deepEqual(router.snapshot().replicas[0]!.indexedBlocksByMedium, { GPU: 0, CPU: 0 });
});

test('the default reload time is the seed replica over PCIe 5.0 x16', () => {
  assert.ok(Math.abs(DEFAULT_CPU_RELOAD_US_PER_TOKEN - 5.2013) < 1e-4);
});

test('property: the credit is monotone and never above a miss while reload < prefill', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 100_000 }),
      fc.double({ min: 0.01, max: 70, noNaN: true }),
      (cpuTokens, reloadUs) => {
        const credit = cpuReloadTokens(cpuTokens, reloadUs, DEFAULT_PREFILL_US_PER_TOKEN);
        assert.ok(credit >= 0 && credit <= cpuTokens);
        assert.ok(
          cpuReloadTokens(cpuTokens + 16, reloadUs) >= cpuReloadTokens(cpuTokens, reloadUs),
        );
      },
    ),
  );
});
