/**
 * A llama.cpp backend's host prompt cache for the router's slot model: `--backend
 * URL,cache-ram-tokens=N` (its bound in tokens) or `cache-ram=MIB,kv-bytes-per-token=B`, the same
 * config keys, in blocks of the gateway's block size; bad values and combinations are refused
 * naming the option and what to give.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  backendHostCacheBlocks,
  backendHostCacheTokens,
} from '../../src/serving/backendHostCache.ts';
import { backendFromDoc, parseBackendFlag } from '../../src/serving/config.ts';

const URL = 'http://127.0.0.1:8080';

test('cache-ram-tokens is the bound in tokens, in whole blocks; 0 is no host cache', () => {
  const b = parseBackendFlag(`${URL},engine=llamacpp,cache-ram-tokens=1000`);
  assert.equal(b.cacheRamTokens, 1000);
  assert.equal(backendHostCacheTokens(b), 1000);
  assert.equal(backendHostCacheBlocks(b, 16), 62);
  assert.equal(backendHostCacheBlocks(parseBackendFlag(`${URL},cache-ram-tokens=0`), 16), 0);
  assert.equal(backendHostCacheBlocks(parseBackendFlag(URL), 16), undefined, 'not sized');
});

test('cache-ram MiB over kv-bytes-per-token: 8192 MiB of Llama 3.1 8B (131,072 B) is 65,536 tokens', () => {
  // 2 x 32 layers x 8 KV heads x 128 head_dim x 2 bytes (f16) = 131,072 B per token.
  const b = parseBackendFlag(`${URL},cache-ram=8192,kv-bytes-per-token=131072`);
  assert.equal(b.cacheRamMiB, 8192);
  assert.equal(b.kvBytesPerToken, 131_072);
  assert.equal(backendHostCacheTokens(b), 65_536);
  assert.equal(backendHostCacheBlocks(b, 16), 4096);
  assert.equal(backendHostCacheBlocks(b, 32), 2048);
});

test('the config keys', () => {
  const a = backendFromDoc({ url: URL, engine: 'llamacpp', 'cache-ram-tokens': 4096 }, 'b');
  assert.equal(backendHostCacheBlocks(a, 16), 256);
  const b = backendFromDoc({ url: URL, 'cache-ram': 1, 'kv-bytes-per-token': 1024 }, 'b');
  assert.equal(backendHostCacheTokens(b), 1024);
});

test('bad values and combinations are refused naming the option', () => {
  const cases: [() => unknown, RegExp][] = [
    [
      () => parseBackendFlag(`${URL},cache-ram-tokens=-1`),
      /--backend cache-ram-tokens must be a whole number of tokens >= 0, got '-1'/,
    ],
    [
      () => parseBackendFlag(`${URL},cache-ram-tokens=lots`),
      /--backend cache-ram-tokens must be a whole number/,
    ],
    [
      () => parseBackendFlag(`${URL},cache-ram=1.5,kv-bytes-per-token=2`),
      /--backend cache-ram must be a whole number of MiB >= 0, got '1.5'/,
    ],
    [
      () => parseBackendFlag(`${URL},cache-ram=8,kv-bytes-per-token=0`),
      /--backend kv-bytes-per-token must be a whole number of bytes >= 1, got '0'/,
    ],
    [
      () => parseBackendFlag(`${URL},cache-ram=8192`),
      /--backend cache-ram needs kv-bytes-per-token=B .*or give cache-ram-tokens=N instead/,
    ],
    [
      () => parseBackendFlag(`${URL},kv-bytes-per-token=1024`),
      /--backend kv-bytes-per-token needs cache-ram=MIB/,
    ],
    [
      () => parseBackendFlag(`${URL},cache-ram-tokens=10,cache-ram=8,kv-bytes-per-token=2`),
      /--backend takes cache-ram-tokens=N or cache-ram=MIB with kv-bytes-per-token=B, not both/,
    ],
    [
      () => parseBackendFlag(`${URL},engine=vllm,cache-ram-tokens=10`),
      /--backend cache-ram, cache-ram-tokens and kv-bytes-per-token apply to engine=llamacpp, not vllm/,
    ],
    [
      () => backendFromDoc({ url: URL, 'cache-ram': 8192 }, 'backends[0]'),
      /backends\[0\] cache-ram needs kv-bytes-per-token/,
    ],
    [
      () => backendFromDoc({ url: URL, 'cache-ram-tokens': 'many' }, 'backends[0]'),
      /backends\[0\]\.cache-ram-tokens must be a whole number of tokens >= 0, got 'many'/,
    ],
  ];
  for (const [run, message] of cases) assert.throws(run, message);
});
