/**
 * The engine honours write backpressure: a stream whose client does not read stops being written
 * to, and past a bound of waiting bytes (or time without a drain) its request is aborted, which
 * frees its KV blocks; a client that reads slowly but does read gets its whole stream.
 */
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { test } from 'node:test';
import { startEngineServer } from '../../src/engine/server/server.ts';
import { waitFor } from '../support/gateway.harness.ts';

const MODEL = 'llama-3.3-70b';

/** A raw connection that sends one streamed completion and never reads the answer. */
function neverReads(url: string, maxTokens: number): Socket {
  const { hostname, port } = new URL(url);
  const body = JSON.stringify({
    model: MODEL,
    prompt: 'hello',
    max_tokens: maxTokens,
    stream: true,
  });
  const socket = connect(Number(port), hostname);
  socket.on('error', () => {});
  socket.pause();
  socket.write(
    `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
  );
  return socket;
}

/** Requests the engine finished as aborted, from its `vllm:request_success_total`. */
async function abortedRequests(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text
    .split('\n')
    .find(
      (l) => l.startsWith('vllm:request_success_total{') && l.includes('finished_reason="abort"'),
    );
  return line ? Number(line.split(' ').pop()) : 0;
}

test('clients that never read lose their requests past the byte bound; KV is freed', async () => {
  const engine = await startEngineServer({ speedup: 200, streamBufferLimitBytes: 64 * 1024 });
  const sockets: Socket[] = [];
  try {
    const maxTokens = 60_000;
    for (let i = 0; i < 6; i++) sockets.push(neverReads(engine.url, maxTokens));
    // Counted as they end, not sampled: on a busy host the first stream can be aborted before
    // the sixth is admitted, so "six running at once" is not something to wait for.
    await waitFor(
      async () => (await abortedRequests(engine.url)) === 6,
      'the six unread streams to be aborted',
      120_000,
    );
    assert.equal(engine.counters().running, 0);
    const generated = engine.counters().generationTokens;
    // Each stream is written until the socket's kernel buffers fill (loopback autotuning lets
    // them reach a few MB, ~18,000 tokens of ~250 B), then 64 KiB more wait here; without
    // backpressure every stream ran to its end (360,000 tokens, all held in memory).
    assert.ok(generated < (6 * maxTokens) / 2, `generated ${generated} tokens`);
    assert.equal(engine.counters().kvBlocksFree, engine.counters().kvBlocksTotal);
  } finally {
    for (const s of sockets) s.destroy();
    await engine.close();
  }
});

test('a client that reads nothing for the stall bound loses its request', async () => {
  const engine = await startEngineServer({ speedup: 200, streamStallTimeoutMs: 300 });
  const socket = neverReads(engine.url, 100_000);
  try {
    await waitFor(
      async () => (await abortedRequests(engine.url)) === 1,
      'the stalled stream to be aborted',
      60_000,
    );
    assert.equal(engine.counters().running, 0);
    assert.ok(engine.counters().generationTokens < 100_000);
  } finally {
    socket.destroy();
    await engine.close();
  }
});

test('a client that reads slowly, but reads, gets its whole stream', async () => {
  const engine = await startEngineServer({ speedup: 200, streamBufferLimitBytes: 16 * 1024 });
  try {
    const res = await fetch(`${engine.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, prompt: 'hello', max_tokens: 3_000, stream: true }),
    });
    const reader = res.body!.getReader();
    let text = '';
    const decoder = new TextDecoder();
    for (let n = 0; ; n++) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
      if (n % 20 === 0) await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(text.match(/"text_completion"/g)?.length, 3_000);
    assert.ok(text.endsWith('data: [DONE]\n\n'));
  } finally {
    await engine.close();
  }
});
