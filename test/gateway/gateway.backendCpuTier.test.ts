/**
 * A backend's CPU tier and GPU pool for the approximate index: `--backend URL,kv-offloading-size=GiB`
 * (vLLM's --kv-offloading-size, in blocks as the engine counts them), `cpu-kv-blocks=N` (the
 * OffloadingConnector's num_cpu_blocks), `kv-blocks=N`, and the same config keys; bad values are
 * refused naming the option.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { backendApproxTiers, backendCpuKvBlocks } from '../../src/serving/backendCpuTier.ts';
import { backendFromDoc, parseBackendFlag } from '../../src/serving/config.ts';

const URL = 'http://127.0.0.1:8001';

test('400 GiB is 81,920 blocks of the seed model at 16 tokens (327,680 B per token)', () => {
  const b = parseBackendFlag(`${URL},kv-offloading-size=400`);
  assert.equal(b.kvOffloadingSizeGiB, 400);
  assert.equal(backendCpuKvBlocks(b, 16), 81_920);
  assert.equal(backendCpuKvBlocks(b, 32), 40_960);
  // A catalog model's own KV bytes: Llama 3.1 8B has 131,072 B per token (32 layers x 8 KV
  // heads x 128 x 2 x 2 bytes), so 2.5x the blocks of the 70B.
  const small = parseBackendFlag(`${URL},model=llama-3.1-8b,kv-offloading-size=400`);
  assert.equal(backendCpuKvBlocks(small, 16), 204_800);
});

test('cpu-kv-blocks and kv-blocks are taken as given; neither: GPU only, default pool', () => {
  const b = parseBackendFlag(`${URL},cpu-kv-blocks=512,kv-blocks=64`);
  assert.deepEqual(backendApproxTiers(b, 16), { kvBlocks: 64, cpuKvBlocks: 512 });
  assert.equal(backendApproxTiers(parseBackendFlag(URL), 16), undefined);
  assert.deepEqual(backendApproxTiers(parseBackendFlag(`${URL},kv-blocks=64`), 16), {
    kvBlocks: 64,
  });
});

test('the config keys', () => {
  const b = backendFromDoc(
    { url: URL, 'kv-offloading-size': 1.5, 'kv-blocks': 100 },
    'backends[0]',
  );
  assert.equal(b.kvOffloadingSizeGiB, 1.5);
  assert.equal(b.kvBlocks, 100);
  assert.equal(backendFromDoc({ url: URL, 'cpu-kv-blocks': 8 }, 'b').cpuKvBlocks, 8);
});

test('bad values are refused naming the option', () => {
  const cases: [() => unknown, RegExp][] = [
    [
      () => parseBackendFlag(`${URL},kv-offloading-size=0`),
      /--backend kv-offloading-size must be a number of GiB > 0, got '0'/,
    ],
    [() => parseBackendFlag(`${URL},kv-offloading-size=lots`), /--backend kv-offloading-size/],
    [
      () => parseBackendFlag(`${URL},cpu-kv-blocks=1.5`),
      /--backend cpu-kv-blocks must be a whole number/,
    ],
    [() => parseBackendFlag(`${URL},kv-blocks=0`), /--backend kv-blocks must be a whole number/],
    [
      () => parseBackendFlag(`${URL},kv-offloading-size=4,cpu-kv-blocks=8`),
      /--backend takes kv-offloading-size or cpu-kv-blocks, not both/,
    ],
    [
      () => parseBackendFlag(`${URL},cpu-tier=4`),
      /unknown option 'cpu-tier' \(.*kv-offloading-size, cpu-kv-blocks, kv-blocks, cache-ram-tokens, cache-ram, kv-bytes-per-token\)/,
    ],
    [
      () => backendFromDoc({ url: URL, 'cpu-kv-blocks': -3 }, 'backends[1]'),
      /config: backends\[1\]\.cpu-kv-blocks must be/,
    ],
    [
      () => backendFromDoc({ url: URL, 'kv-offloading-size': true }, 'b'),
      /config: b\.kv-offloading-size/,
    ],
  ];
  for (const [f, re] of cases) assert.throws(f, re);
});
