/**
 * A real engine: the tiny model on llama.cpp behind the engine server. A prompt sharing a prefix
 * with an earlier one reuses the KV of the shared blocks (in place, or copied from a running
 * sequence) and says so in cached_tokens, greedy output after reuse is the cold run's, and a
 * sequence overwritten with no other copy takes its blocks out of the cache. At most two engines
 * at once, one thread each. The other parts: engineServer.llamaCpp.*.test.ts; the shared prompt and
 * helpers: test/support/llamaEngine.ts.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { EngineServerHandle } from '../../src/engine/server/server.ts';
import { clientFor, metric, scrape, waitFor } from '../support/engineServerHelpers.ts';
import {
  BASE_PROMPT as BASE,
  greedy,
  sharedPrefix,
  startLlamaEngine,
  tokenize,
} from '../support/llamaEngine.ts';

const BLOCK = 16;

/** The cold reference: a fresh engine that sees each prompt once. */
let cold: EngineServerHandle;

before(async () => {
  cold = await startLlamaEngine({ maxSeqs: 1 });
});

after(async () => {
  await cold?.close();
});

test('a prompt sharing a prefix reports the shared blocks as cached, and greedy output equals a cold run', async () => {
  const warm = await startLlamaEngine({ maxSeqs: 1 });
  try {
    const first = `${BASE}First, the question about blocks.`;
    const second = `${BASE}Second, a different question entirely.`;
    const a = await greedy(warm, first);
    assert.equal(a.cached, 0);
    const b = await greedy(warm, second);
    const shared = sharedPrefix(await tokenize(warm, first), await tokenize(warm, second));
    assert.ok(shared >= 2 * BLOCK, `the prompts share ${shared} tokens`);
    assert.equal(b.cached, Math.floor(shared / BLOCK) * BLOCK);
    const reference = await greedy(cold, second);
    assert.equal(reference.cached, 0);
    assert.equal(b.text, reference.text, 'greedy output after reuse = cold output');
    assert.ok(b.text.length > 0);
    const samples = await scrape(warm);
    assert.equal(metric(samples, 'vllm:prefix_cache_hits_total'), b.cached);
    assert.equal(
      metric(samples, 'vllm:prefix_cache_queries_total'),
      a.promptTokens + b.promptTokens,
    );
    assert.deepEqual(warm.placements?.(), { inPlace: 1, copied: 0, cold: 1, uncached: 0 });
  } finally {
    await warm.close();
  }
});

test('a prefix held by a running sequence is copied by state save and load; the output is the cold one', async () => {
  const warm = await startLlamaEngine({ maxSeqs: 2 }, { cacheSequences: 0 });
  try {
    const long = `${BASE}Keep talking for a while.`;
    const client = clientFor(warm);
    const stream = await client.completions.create({
      model: 'tiny',
      prompt: long,
      max_tokens: 400,
      temperature: 0,
      stream: true,
    });
    const it = stream[Symbol.asyncIterator]();
    await it.next(); // the long request decodes now, its prompt in its sequence
    const second = `${BASE}Then answer this one.`;
    const b = await greedy(warm, second);
    const shared = sharedPrefix(await tokenize(warm, long), await tokenize(warm, second));
    assert.equal(b.cached, Math.floor(shared / BLOCK) * BLOCK);
    assert.equal(warm.placements?.().copied, 1, 'copied from the running sequence');
    const reference = await greedy(cold, second);
    assert.equal(b.text, reference.text);
    stream.controller.abort();
    await waitFor(
      () => warm.counters().running === 0,
      30_000,
      'the aborted stream to free its sequence',
    );
  } finally {
    await warm.close();
  }
});

test('a sequence overwritten with no other copy takes its blocks out of the cache', async () => {
  // One sequence: every new prompt overwrites the last one's KV.
  const warm = await startLlamaEngine({ maxSeqs: 1 }, { cacheSequences: 0 });
  try {
    const first = `${BASE}One.`;
    await greedy(warm, first, 2);
    const blocks = warm.counters();
    assert.ok(blocks.kvBlocksTotal > 0);
    await greedy(
      warm,
      'Something unrelated, long enough to fill a block or two of tokens here.',
      2,
    );
    const again = await greedy(warm, first, 2);
    assert.equal(again.cached, 0, 'the first prompt was recomputed: nothing claimed that was gone');
    assert.equal(warm.placements?.().inPlace, 0);
    assert.ok((warm.placements?.().uncached ?? 0) >= Math.floor(again.promptTokens / BLOCK));
  } finally {
    await warm.close();
  }
});
