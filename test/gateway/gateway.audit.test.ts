/**
 * The gateway's side of the cache audit: the usage read off responses, the usage chunk the
 * gateway asked for on the client's behalf taken out byte for byte, the hit-counter fallback,
 * metrics and `/router/replicas`. The upstream here is a fake vLLM whose bytes follow vLLM's
 * serving_chat: chunks serialized with exclude_unset (no `usage` key unless continuous usage
 * is on), then with include_usage a last chunk with `choices: []` and `usage`, then [DONE].
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { requestUsage } from '../../src/serving/audit/streamUsage.ts';
import { UsageTap } from '../../src/serving/audit/usageTap.ts';
import { defaultConfig } from '../../src/serving/config.ts';
import { type GatewayHandle, startGateway } from '../../src/gateway/gateway.ts';

const HEAD =
  '{"id":"chatcmpl-7","object":"chat.completion.chunk","created":1733000000,"model":"fake"';
const CHUNKS = [
  `data: ${HEAD},"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n`,
  `data: ${HEAD},"choices":[{"index":0,"delta":{"content":"Hé ✓"},"logprobs":null,"finish_reason":null}]}\n\n`,
  `data: ${HEAD},"choices":[{"index":0,"delta":{"content":" done"},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}\n\n`,
];
const USAGE = (cached: number) =>
  `data: ${HEAD},"choices":[],"usage":{"prompt_tokens":40,"total_tokens":43,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":${cached}}}}\n\n`;
const DONE = 'data: [DONE]\n\n';
const WITHOUT = Buffer.from(CHUNKS.join('') + DONE);
const WITH = (cached: number) => Buffer.from(CHUNKS.join('') + USAGE(cached) + DONE);

function cutsOf(bytes: Buffer, points: number[]): Buffer[] {
  const at = [...new Set(points.map((p) => p % bytes.length))].sort((a, b) => a - b);
  const parts: Buffer[] = [];
  let from = 0;
  for (const p of at) {
    parts.push(bytes.subarray(from, p));
    from = p;
  }
  parts.push(bytes.subarray(from));
  return parts;
}

describe('usage tap', () => {
  test('a stream the gateway asked usage for loses exactly its usage event, however it is cut', () => {
    fc.assert(
      fc.property(
        fc.array(fc.nat(), { maxLength: 12 }),
        fc.nat({ max: 5000 }),
        (points, cached) => {
          const tap = new UsageTap({ stream: true, strip: true });
          tap.start(200, 'text/event-stream');
          const out = cutsOf(WITH(cached), points).map((c) => tap.data(c));
          out.push(tap.end());
          return (
            Buffer.concat(out).equals(WITHOUT) && tap.cachedTokens === cached && tap.stripped === 1
          );
        },
      ),
      { seed: 34 },
    );
  });

  test('with continuous usage (a usage key in every chunk) only the usage-only event is dropped', () => {
    // vLLM's continuous_usage_stats: each chunk with choices carries usage too; only the last,
    // with `choices: []`, is the one asked for. Several events per chunk, any cut.
    const cont = (i: number) =>
      `data: ${HEAD},"choices":[{"index":0,"delta":{"content":"t${i}"},"finish_reason":null}],"usage":{"prompt_tokens":40,"total_tokens":${41 + i},"completion_tokens":${i + 1}}}\n\n`;
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 6 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        (n, points) => {
          const events = Array.from({ length: n }, (_, i) => cont(i)).join('');
          const tap = new UsageTap({ stream: true, strip: true });
          tap.start(200, 'text/event-stream');
          const out = cutsOf(Buffer.from(events + USAGE(7) + DONE), points).map((c) => tap.data(c));
          out.push(tap.end());
          return (
            Buffer.concat(out).equals(Buffer.from(events + DONE)) &&
            tap.cachedTokens === 7 &&
            tap.stripped === 1
          );
        },
      ),
      { seed: 36 },
    );
  });

  test('a chunk of whole events with nothing to drop passes as the same bytes, not a copy', () => {
    const tap = new UsageTap({ stream: true, strip: true });
    tap.start(200, 'text/event-stream');
    const chunk = Buffer.from(CHUNKS.slice(0, 2).join(''));
    const out = tap.data(chunk);
    assert.ok(out.equals(chunk));
    assert.equal(out.buffer, chunk.buffer);
    // The chunk with a finish_reason waits for the usage chunk (which may carry engine fields).
    assert.equal(tap.data(Buffer.from(CHUNKS[2]!)).length, 0);
    assert.ok(tap.data(Buffer.from(USAGE(3))).equals(Buffer.from(CHUNKS[2]!)));
    assert.ok(tap.data(Buffer.from(DONE)).equals(Buffer.from(DONE)));
    assert.equal(tap.cachedTokens, 3);
  });

  test("the usage chunk's engine fields (llama.cpp's timings) move to the last content chunk, however cut", () => {
    const timings =
      '"timings":{"prompt_n":40,"prompt_ms":12.5,"predicted_n":3,"predicted_ms":30.1}';
    const usage = USAGE(5).replace(/}\n\n$/, `,${timings}}\n\n`);
    const finishWith = CHUNKS[2]!.replace(/}\n\n$/, `,${timings}}\n\n`);
    const sent = Buffer.from(CHUNKS.join('') + usage + DONE);
    const expected = Buffer.from(CHUNKS.slice(0, 2).join('') + finishWith + DONE);
    fc.assert(
      fc.property(fc.array(fc.nat(), { maxLength: 12 }), (points) => {
        const tap = new UsageTap({ stream: true, strip: true });
        tap.start(200, 'text/event-stream');
        const out = cutsOf(sent, points).map((c) => tap.data(c));
        out.push(tap.end());
        return Buffer.concat(out).equals(expected) && tap.cachedTokens === 5;
      }),
      { seed: 53 },
    );
    // No content chunk to carry them (nothing finished): the usage chunk passes without usage.
    const tap = new UsageTap({ stream: true, strip: true });
    tap.start(200, 'text/event-stream');
    const alone = JSON.parse(tap.data(Buffer.from(usage)).toString().slice(6));
    assert.equal(alone.usage, undefined);
    assert.deepEqual(alone.choices, []);
    assert.equal(alone.timings.prompt_n, 40);
  });

  test('a stream the client asked usage for passes whole, chunk by chunk, and is read', () => {
    const tap = new UsageTap({ stream: true, strip: false });
    tap.start(200, 'text/event-stream');
    const parts = cutsOf(WITH(16), [10, 300, 301, 700]);
    for (const p of parts) assert.equal(tap.data(p), p);
    assert.equal(tap.end().length, 0);
    assert.equal(tap.cachedTokens, 16);
  });

  test('a JSON answer is read at its end; no prompt_tokens_details is null', () => {
    const body = (details: string) =>
      Buffer.from(
        `{"id":"cmpl-1","choices":[{"text":"x"}],"usage":{"prompt_tokens":9,${details}"total_tokens":10}}`,
      );
    const tap = new UsageTap({ stream: false, strip: false });
    tap.start(200, 'application/json');
    tap.data(body('"prompt_tokens_details":{"cached_tokens":32},').subarray(0, 20));
    tap.data(body('"prompt_tokens_details":{"cached_tokens":32},').subarray(20));
    tap.end();
    assert.equal(tap.cachedTokens, 32);
    const none = new UsageTap({ stream: false, strip: false });
    none.start(200, 'application/json');
    none.data(body('"prompt_tokens_details":null,'));
    none.end();
    assert.equal(none.cachedTokens, null);
  });

  test('stream_options spliced in only when the client sent none', () => {
    const raw = Buffer.from('{"model":"fake","stream":true,"messages":[]}\n');
    const asked = requestUsage(raw, JSON.parse(raw.toString()));
    assert.equal(asked.asked, true);
    assert.equal(
      asked.body.toString(),
      '{"model":"fake","stream":true,"messages":[],"stream_options":{"include_usage":true}}\n',
    );
    const own = Buffer.from('{"stream":true,"stream_options":{"include_usage":false}}');
    assert.deepEqual(
      { ...requestUsage(own, JSON.parse(own.toString())), body: null },
      { body: null, asked: false, reports: false },
    );
    const plain = Buffer.from('{"prompt":"x"}');
    assert.equal(requestUsage(plain, JSON.parse(plain.toString())).body, plain);
  });
});

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('gateway audit against a fake vLLM', () => {
  let backend: Server;
  let gw: GatewayHandle;
  const seen: unknown[] = [];
  let hits = 0;
  let details = true;
  before(async () => {
    backend = createServer((req, res) => {
      if (req.url === '/metrics') {
        res.end(
          'vllm:kv_cache_usage_perc 0.1\nvllm:num_requests_running 0\nvllm:num_requests_waiting 0\n' +
            `vllm:prefix_cache_hits_total{engine="0",model_name="fake"} ${hits}\n` +
            'vllm:cache_config_info{block_size="16",num_gpu_blocks="512"} 1.0\n',
        );
        return;
      }
      if (req.url === '/health') return void res.end();
      if (req.url !== '/v1/chat/completions' && req.url !== '/v1/completions') {
        res.writeHead(404).end();
        return;
      }
      const parts: Buffer[] = [];
      req.on('data', (c: Buffer) => parts.push(c));
      req.on('end', async () => {
        const body = JSON.parse(Buffer.concat(parts).toString()) as {
          stream?: boolean;
          stream_options?: { include_usage?: boolean };
        };
        seen.push(body);
        if (!body.stream) {
          // The engine counts its hits when it admits the request, before it answers.
          if (!details) hits += 16;
          const d = details ? '"prompt_tokens_details":{"cached_tokens":24},' : '';
          const json = `{"id":"cmpl-1","object":"text_completion","created":1,"model":"fake","choices":[{"index":0,"text":"x","logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":40,"total_tokens":41,"completion_tokens":1,${d}"x":0}}`;
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(json);
          return;
        }
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const bytes = body.stream_options?.include_usage ? WITH(32) : WITHOUT;
        // Odd-sized writes, one of them inside the usage event and one inside the check mark.
        for (const part of cutsOf(bytes, [7, 150, bytes.indexOf('✓') + 1, bytes.length - 60])) {
          res.write(part);
          await new Promise((r) => setTimeout(r, 2));
        }
        res.end();
      });
    });
    const url = await listen(backend);
    gw = await startGateway({
      ...defaultConfig(),
      port: 0,
      scrapeMs: 50,
      backends: [{ url, events: null, replay: null, model: 'fake', apiKey: null }],
    });
  });
  after(async () => {
    await gw?.close();
    backend.closeAllConnections();
    await new Promise<void>((r) => backend.close(() => r()));
  });

  const post = async (body: unknown): Promise<Buffer> => {
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    assert.equal(res.status, 200);
    return Buffer.from(await res.arrayBuffer());
  };
  const auditOf = async () => {
    const res = await fetch(`${gw.url}/router/replicas`);
    const json = (await res.json()) as {
      replicas: {
        audit: {
          verdict: string;
          predictedTokens: number;
          reportedTokens: number;
          promptTokens: number;
          window: { requests: number; size: number };
          sources: { usage: number; hitCounter: number };
        };
      }[];
    };
    return json.replicas[0]!.audit;
  };

  test('the client gets exactly the bytes it would have got; the gateway read the usage', async () => {
    const messages = [{ role: 'user', content: 'hello there' }];
    const bytes = await post({ model: 'fake', stream: true, messages });
    assert.ok(bytes.equals(WITHOUT), `client bytes differ:\n${bytes.toString()}`);
    const last = seen.at(-1) as { stream_options?: unknown };
    assert.deepEqual(last.stream_options, { include_usage: true });
    const audit = await auditOf();
    assert.equal(audit.reportedTokens, 32);
    assert.equal(audit.window.requests, 1);
    assert.equal(audit.sources.usage, 1);
    assert.equal(audit.verdict, 'ok');
  });

  test('a client that asked for usage gets the usage chunk, unchanged', async () => {
    const messages = [{ role: 'user', content: 'hello again' }];
    const bytes = await post({
      model: 'fake',
      stream: true,
      stream_options: { include_usage: true },
      messages,
    });
    assert.ok(bytes.equals(WITH(32)));
    assert.equal((await auditOf()).reportedTokens, 64);
  });

  test('metrics: predicted and reported counters per replica, the error histogram', async () => {
    const text = await (await fetch(`${gw.url}/metrics`)).text();
    assert.match(
      text,
      /kvroute_gateway_reported_cached_tokens_total\{replica="[^"]+",model="fake"\} 64/,
    );
    assert.match(
      text,
      /kvroute_gateway_predicted_cached_tokens_total\{replica="[^"]+",model="fake"\} \d+/,
    );
    assert.match(
      text,
      /kvroute_gateway_cache_prediction_error_ratio_count\{replica="[^"]+",model="fake"\} 2/,
    );
    assert.match(text, /kvroute_gateway_audit_verdict\{replica="[^"]+",model="fake"\} 0/);
  });

  test('without prompt_tokens_details the hit counter delta over the scrape is the report', async () => {
    details = false;
    const before = await auditOf();
    const res = await fetch(`${gw.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'fake', prompt: 'a plain prompt', max_tokens: 1 }),
    });
    assert.equal(res.status, 200);
    await res.arrayBuffer();
    // Polled for up to 30 s: the judgment lands after the response, on a busy host later.
    for (let i = 0; i < 1_500; i++) {
      if ((await auditOf()).sources.hitCounter > 0) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const after_ = await auditOf();
    assert.equal(after_.sources.hitCounter, 1);
    // The counter grew by 16; a report is clamped to the request's prompt tokens (3 here).
    assert.equal(
      after_.reportedTokens - before.reportedTokens,
      Math.min(16, after_.promptTokens - before.promptTokens),
    );
    assert.equal(after_.window.requests, before.window.requests + 1);
  });
});

test('the dashboard row carries the audit: verdict, error, index source', async () => {
  const { sampleGateway } = await import('../../src/gateway/dashboard/state.ts');
  const { GatewayMetrics } = await import('../../src/serving/metrics.ts');
  const { Router } = await import('../../src/router/index.ts');
  const snap = new Router({ replicas: ['a'] }).snapshot(0);
  const replicas = snap.replicas.map((r) => ({
    ...r,
    audit: { verdict: 'over-predicts', hitRateError: 0.4, indexSource: 'events' },
  }));
  const sample = sampleGateway({ replicas }, new GatewayMetrics({ replicaLoads: () => [] }), 0, 0);
  assert.deepEqual(sample.replicas[0]!.audit, {
    verdict: 'over-predicts',
    hitRateError: 0.4,
    indexSource: 'events',
  });
});

test('repair plan: replay, then approx, events retried after ok requests (doubling)', async () => {
  const { RepairPlan } = await import('../../src/serving/audit/repair.ts');
  const plan = new RepairPlan(4, 3);
  const change = (verdict: 'ok' | 'over-predicts' | 'under-predicts', changed: boolean) => ({
    replica: 'r',
    verdict,
    previous: 'ok' as const,
    changed,
    miss: 0 as const,
  });
  assert.equal(plan.next(change('ok', false)), null);
  assert.equal(plan.next(change('over-predicts', true)), 'replay');
  assert.equal(plan.stage, 'replay');
  plan.replayFailed();
  assert.equal(plan.stage, 'approx');
  assert.equal(plan.next(change('ok', false)), null);
  assert.equal(plan.next(change('ok', false)), null);
  assert.equal(plan.next(change('ok', false)), 'retry-events');
  assert.equal(plan.stage, 'replay');
  assert.equal(plan.retryAfter, 6);
  // Events over-predict again: straight back to the fallback.
  assert.equal(plan.next(change('over-predicts', true)), 'approx');
  assert.equal(plan.next(change('under-predicts', true)), 'diagnose');
  assert.equal(plan.stage, 'approx');
  // A replay that mended it: back to events after a clean window.
  const mended = new RepairPlan(2);
  assert.equal(mended.next(change('over-predicts', true)), 'replay');
  assert.equal(mended.next(change('ok', true)), null);
  assert.equal(mended.next(change('ok', false)), 'recovered');
  assert.equal(mended.stage, 'events');
});
