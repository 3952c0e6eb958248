/**
 * The gateway in front of two real llama-servers (llama.cpp's own server, 4 slots each, no host
 * prompt cache, the tiny model), driven with the `openai` client on a shared-prefix chat
 * workload: both are detected as llama.cpp, each reports its load, the tokenizers agree, and the
 * tokens the router predicted cached are the ones the engine served from its cache.
 * Skipped where the prebuilt binary is missing or cannot run on this processor.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { findLlamaServer } from '../support/llamaServer.ts';
import {
  LLAMA_DEFAULT_CACHE_RAM_MIB,
  runLlamaStack,
  TINY_KV_BYTES_PER_TOKEN,
} from '../support/llamaStack.ts';

test('two real llama-servers behind the gateway: detected, reporting, predictions served', async (t) => {
  const binary = findLlamaServer();
  if (!binary.ok) {
    t.skip(binary.why);
    return;
  }
  const figures = await runLlamaStack(binary, {
    cacheRamMiB: 0,
    customers: 3,
    requestsPerCustomer: 3,
  });
  assert.deepEqual(figures.engines, ['llamacpp', 'llamacpp']);
  assert.equal(figures.replicasWithLoad, 2, 'a load report for every replica');
  assert.equal(figures.mismatchLines, 0, JSON.stringify(figures.mismatches));
  assert.equal(figures.requests.length, 9);
  for (const r of figures.requests) {
    assert.ok(r.answer.length > 0, `an answer for customer ${r.customer}`);
    assert.equal(r.routerPromptTokens, r.promptTokens, "the router counts the engine's tokens");
  }
  // Each customer's later requests find its system prompt cached: predictions were made.
  assert.ok(figures.predictedTokens > 0, 'the router predicted hits');
  assert.ok(
    figures.predictedHitsReal >= 0.9,
    `predicted hit tokens the engine served from cache: ${figures.predictedHitsReal}`,
  );
});

test("llama-server's default host prompt cache, sized for the router: predictions served", async (t) => {
  const binary = findLlamaServer();
  if (!binary.ok) {
    t.skip(binary.why);
    return;
  }
  const figures = await runLlamaStack(binary, {
    // --cache-ram left to llama-server's default, 8192 MiB, which the gateway is told.
    backend: {
      engine: 'llamacpp',
      cacheRamMiB: LLAMA_DEFAULT_CACHE_RAM_MIB,
      kvBytesPerToken: TINY_KV_BYTES_PER_TOKEN,
    },
    customers: 3,
    requestsPerCustomer: 3,
  });
  assert.equal(figures.cacheRam, 'default');
  assert.deepEqual(figures.engines, ['llamacpp', 'llamacpp']);
  assert.equal(figures.mismatchLines, 0, JSON.stringify(figures.mismatches));
  assert.equal(figures.requests.length, 9);
  assert.ok(figures.predictedTokens > 0, 'the router predicted hits');
  assert.ok(
    figures.predictedHitsReal >= 0.9,
    `predicted hit tokens the engine served from cache: ${figures.predictedHitsReal}`,
  );
});
