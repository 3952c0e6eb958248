import assert from 'node:assert/strict';
import { test } from 'node:test';
import { metric, scrape, startTestEngine, waitFor } from '../support/engineServerHelpers.ts';

const MODEL = 'llama-3.3-70b';
const LABELS = `model_name="${MODEL}",engine="0"`;

function openStream(url: string, prompt: number[], maxTokens: number) {
  const controller = new AbortController();
  const response = fetch(`${url}/v1/completions`, {
    method: 'POST',
    body: JSON.stringify({ model: MODEL, prompt, max_tokens: maxTokens, stream: true }),
    signal: controller.signal,
  });
  return { response, disconnect: () => controller.abort() };
}

test('/metrics gauges match the scheduler queues; a disconnect frees KV at once', async () => {
  // Wall-clock speed and 2 running slots: 5 long requests sit still as 2 running, 3 waiting.
  const server = await startTestEngine({ speedup: 1, maxSeqs: 2 });
  try {
    const before = await scrape(server);
    assert.equal(metric(before, 'vllm:kv_cache_usage_perc', LABELS), 0);
    const streams = Array.from({ length: 5 }, (_, i) =>
      openStream(
        server.url,
        Array.from({ length: 200 }, (_, t) => 100 + i * 1000 + t),
        5_000,
      ),
    );
    await Promise.all(streams.map((s) => s.response));
    await waitFor(
      async () =>
        metric(await scrape(server), 'vllm:time_to_first_token_seconds_count', LABELS) === 2,
      30_000,
      '2 running, both past their first token',
    );
    // Decode tokens out, so that inter-token latencies have been observed: of 8 counted, 2 are
    // first tokens and up to 2 (one per running request) may be in the step still in flight,
    // so at least 4 were observed (the bound asserted below).
    await waitFor(() => server.counters().generationTokens >= 8, 30_000, 'decode tokens');
    // Decodes keep running while the scrape is answered: KV usage may grow a block meanwhile,
    // so the scraped value must lie between the core's value before and after the scrape.
    const c0 = server.counters();
    const samples = await scrape(server);
    const c = server.counters();
    assert.equal(metric(samples, 'vllm:num_requests_running', LABELS), c.running);
    assert.equal(metric(samples, 'vllm:num_requests_waiting', LABELS), c.waiting);
    assert.equal(c.waiting, 3);
    const usage = metric(samples, 'vllm:kv_cache_usage_perc', LABELS);
    assert.ok(
      usage >= c0.kvUsage && usage <= c.kvUsage,
      `${c0.kvUsage} <= ${usage} <= ${c.kvUsage}`,
    );
    assert.ok(usage > 0 && usage <= 1);
    assert.ok(metric(samples, 'vllm:prompt_tokens_total', LABELS) >= 400);
    assert.ok(metric(samples, 'vllm:prefix_cache_queries_total', LABELS) >= 400);
    assert.equal(metric(samples, 'vllm:num_preemptions_total', LABELS), 0);
    assert.equal(metric(samples, 'vllm:time_to_first_token_seconds_count', LABELS), 2);
    // One inter-token latency per output token after each request's first (2 first tokens). The
    // core counts a step's tokens when it plans it, the sinks observe them when it is due to end:
    // the step in flight may hold one token per running request not yet observed.
    const itl = metric(samples, 'vllm:inter_token_latency_seconds_count', LABELS);
    const inFlight = c0.running;
    assert.ok(
      itl >= c0.generationTokens - 2 - inFlight && itl <= c.generationTokens - 2,
      `${c0.generationTokens} - 2 - ${inFlight} <= ${itl} <= ${c.generationTokens} - 2`,
    );
    assert.ok(itl >= 4, `${itl}`);
    assert.ok(metric(samples, 'kvroute_engine_step_lag_seconds_count', LABELS) > 0);

    for (const s of streams) s.disconnect();
    await waitFor(
      () => server.counters().running + server.counters().waiting === 0,
      30_000,
      'aborts',
    );
    assert.equal(server.counters().kvUsage, 0, 'KV usage is back to its former value');
    const after = await scrape(server);
    assert.equal(metric(after, 'vllm:kv_cache_usage_perc', LABELS), 0);
    assert.equal(metric(after, 'vllm:num_requests_running', LABELS), 0);
  } finally {
    await server.close();
  }
});

test('a disconnect mid-request leaves the other requests and the KV of others intact', async () => {
  const server = await startTestEngine({ speedup: 1 });
  try {
    const keep = openStream(
      server.url,
      Array.from({ length: 300 }, (_, t) => 7 + t),
      5_000,
    );
    await keep.response;
    await waitFor(() => server.counters().running === 1, 30_000, 'first running');
    const alone = server.counters();
    const drop = openStream(
      server.url,
      Array.from({ length: 900 }, (_, t) => 50_000 + t),
      5_000,
    );
    await drop.response;
    // Running 2: admitted, its 900-token prompt's 57 blocks taken in the same step (one chunk).
    await waitFor(() => server.counters().running === 2, 30_000, 'second admitted');
    const both = server.counters();
    drop.disconnect();
    await waitFor(() => server.counters().running === 1, 30_000, 'second aborted');
    const after = server.counters();
    // The kept stream keeps decoding meanwhile, as many tokens as the host's speed allows: it
    // grows by at most one block per 16 tokens generated (by either request), plus the one a
    // partly filled block opens, and never shrinks. The dropped one's 57 blocks are all freed.
    const used = (c: typeof after): number => c.kvBlocksTotal - c.kvBlocksFree;
    const growthBound = (from: typeof after): number =>
      Math.ceil((after.generationTokens - from.generationTokens) / 16) + 1;
    const grown = used(after) - used(alone);
    assert.ok(grown >= 0 && grown <= growthBound(alone), `kept stream grew ${grown} blocks`);
    assert.ok(
      used(after) <= used(both) - 57 + growthBound(both),
      `${used(after)} blocks after, ${used(both)} with both`,
    );
    keep.disconnect();
  } finally {
    await server.close();
  }
});

test('timing: a cold 8,000-token prompt at --speedup 1 gets no first token before ~570 ms', async () => {
  // The seed's hardware (llama-3.3-70b, FP8 weights, TP 2 H200, 50 % MFU): 71.3 us/token, so
  // 8,000 x 71.3 us = 570.4 ms of modeled prefill. The driver waits out each step's modeled time
  // before delivering it and a timer never fires early: the first token cannot come sooner, on
  // any host. How close to 570 ms it comes on an idle one is a speed figure, not a test.
  const server = await startTestEngine({ speedup: 1 });
  try {
    const before = await scrape(server);
    const prompt = Array.from({ length: 8_000 }, (_, t) => 10 + ((t * 7919) % 100_000));
    const started = performance.now();
    const res = await fetch(`${server.url}/v1/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: MODEL, prompt, max_tokens: 2, stream: true }),
    });
    const reader = res.body!.getReader();
    const first = await reader.read();
    const ttftMs = performance.now() - started;
    assert.match(new TextDecoder().decode(first.value), /^data: /);
    while (!(await reader.read()).done) {}
    assert.ok(ttftMs >= 570, `TTFT ${ttftMs.toFixed(1)} ms, before the modeled 570.4 ms`);
    const samples = await scrape(server);
    // The server's own histogram: one TTFT, above 0.5 s.
    const delta = (name: string, labels = LABELS) =>
      metric(samples, name, labels) - metric(before, name, labels);
    assert.equal(delta('vllm:time_to_first_token_seconds_count'), 1);
    const bucket = (le: string) =>
      metric(samples, 'vllm:time_to_first_token_seconds_bucket', `le="${le}"`) -
      metric(before, 'vllm:time_to_first_token_seconds_bucket', `le="${le}"`);
    assert.equal(bucket('0.5'), 0, 'no TTFT at or under 0.5 s');
    assert.ok(delta('vllm:time_to_first_token_seconds_sum') >= 0.57);
    // Budget 2,048: 2,048 + 2,048 + 2,048 + 1,856 prompt tokens in 4 steps, then 1 decode.
    assert.equal(delta('vllm:prompt_tokens_total'), 8_000);
    assert.equal(delta('vllm:iteration_tokens_total_count'), 5);
    assert.equal(delta('vllm:iteration_tokens_total_sum'), 8_001);
  } finally {
    await server.close();
  }
});
