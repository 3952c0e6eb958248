/**
 * The audit's checks on what engines claim, live behind the gateway: a reported cached-token
 * count of 1e308 (or one that parses to Infinity, above the prompt, below 0) leaves the gateway's counters finite and
 * clamped, and an engine that lies consistently (`--fault-lie`: every prompt published as
 * stored, no removal, the whole prompt reported cached) is flagged by its index outgrowing its
 * KV pool, the pool's size read off its `/metrics`.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, test } from 'node:test';
import { defaultConfig } from '../../src/serving/config.ts';
import { type GatewayHandle, startGateway } from '../../src/gateway/gateway.ts';
import {
  type EngineServerHandle,
  startEngine,
  startGatewayFor,
  tokens,
  waitFor,
} from '../support/gateway.harness.ts';

const PROMPT_TOKENS = 40;

function counter(text: string, name: string): number[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${name}{`))
    .map((l) => Number(l.split(' ').pop()));
}

describe('reported counts the gateway cannot trust', () => {
  let backend: Server;
  let gw: GatewayHandle;
  const reports = ['1e308', '1e308', '1e400', '1000000', '-5', '8'];
  let next = 0;

  after(async () => {
    await gw?.close();
    backend?.closeAllConnections();
    if (backend) await new Promise<void>((r) => backend.close(() => r()));
  });

  test('1e308, above the prompt, below 0: counters stay finite and clamped', async () => {
    backend = createServer((req, res) => {
      if (req.url === '/metrics') {
        res.end(
          'vllm:kv_cache_usage_perc 0.1\nvllm:num_requests_running 0\nvllm:num_requests_waiting 0\n' +
            'vllm:cache_config_info{block_size="16",num_gpu_blocks="512"} 1.0\n',
        );
        return;
      }
      if (req.url === '/health') return void res.end();
      if (req.url !== '/v1/completions') return void res.writeHead(404).end();
      req.resume();
      req.on('end', () => {
        const cached = reports[next++ % reports.length];
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(
          `{"id":"cmpl-1","object":"text_completion","created":1,"model":"fake","choices":[{"index":0,"text":"x","logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":${PROMPT_TOKENS},"total_tokens":${PROMPT_TOKENS + 1},"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":${cached}}}}`,
        );
      });
    });
    await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(backend.address() as AddressInfo).port}`;
    gw = await startGateway({
      ...defaultConfig(),
      port: 0,
      scrapeMs: 50,
      backends: [{ url, events: null, replay: null, model: 'fake', apiKey: null }],
    });
    for (let i = 0; i < reports.length; i++) {
      const res = await fetch(`${gw.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'fake', prompt: tokens(i, PROMPT_TOKENS), max_tokens: 1 }),
      });
      assert.equal(res.status, 200);
      await res.arrayBuffer();
    }
    const text = await (await fetch(`${gw.url}/metrics`)).text();
    const reported = counter(text, 'kvroute_gateway_reported_cached_tokens_total');
    const predicted = counter(text, 'kvroute_gateway_predicted_cached_tokens_total');
    assert.equal(reported.length, 1);
    // 1e308 (twice: 2e308 would be +Inf) and 1e6 clamped to the prompt; 1e400 (Infinity once
    // parsed) and -5 are no report at all (the usage tap reads neither); 8 as it is.
    assert.deepEqual(reported, [3 * PROMPT_TOKENS + 0 + 8]);
    for (const v of [...reported, ...predicted]) assert.ok(Number.isFinite(v), `counter ${v}`);
    assert.doesNotMatch(text, /kvroute_gateway_[a-z_]+\{[^}]*\} (\+Inf|NaN|Infinity)/);
    const replicas = (await (await fetch(`${gw.url}/router/replicas`)).json()) as {
      replicas: {
        audit: { window: { requests: number }; evidence: { malformed: number; clamped: number } };
      }[];
    };
    const audit = replicas.replicas[0]!.audit;
    assert.equal(audit.window.requests, 4);
    assert.equal(audit.evidence.clamped, 3);
  });
});

describe('an engine that lies consistently', () => {
  let healthy: EngineServerHandle;
  let liar: EngineServerHandle;
  let gw: GatewayHandle;

  after(async () => {
    await gw?.close();
    await healthy?.close();
    await liar?.close();
  });

  test('is flagged by its index outgrowing its KV pool within 60 requests', async () => {
    healthy = await startEngine({ seed: 1, speedup: 100 });
    liar = await startEngine({ seed: 2, speedup: 100, kvBlocks: 64, faults: { lie: true } });
    gw = await startGatewayFor([healthy, liar], { scrapeMs: 50 });
    interface Row {
      url: string;
      audit: {
        verdict: string;
        repair: { repairs: number };
        evidence: { poolOverflow: boolean; poolBlocks: number | null };
      };
      subscriber: { lastSeq: string | null } | null;
    }
    const rows = async (): Promise<Row[]> =>
      ((await (await fetch(`${gw.url}/router/replicas`)).json()) as { replicas: Row[] }).replicas;
    const rowOf = async (e: EngineServerHandle) => (await rows()).find((r) => r.url === e.url)!;
    const settle = () =>
      waitFor(async () => {
        const now = await rows();
        return [healthy, liar].every((e) => {
          const published = e.kvEventBatches();
          const last = now.find((r) => r.url === e.url)?.subscriber?.lastSeq ?? null;
          return published === 0 ? last === null : last === String(published - 1);
        });
      }, 'KV events to settle');
    // The pool's size is known before the first judgment.
    await waitFor(async () => {
      const text = await (await fetch(`${liar.url}/metrics`)).text();
      return text.includes('num_gpu_blocks="64"');
    }, 'the liar exporting its pool');
    let flaggedAt: number | null = null;
    for (let i = 0; i < 60 && flaggedAt === null; i++) {
      const prompt = [...tokens(2000 + (i % 20), 128), ...tokens(60_000 + i, 8)];
      const res = await fetch(`${gw.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: healthy.servedModelName, prompt, max_tokens: 1 }),
      });
      assert.equal(res.status, 200);
      await res.arrayBuffer();
      await settle();
      const a = (await rowOf(liar)).audit;
      if (a.verdict === 'over-predicts' || a.repair.repairs > 0) flaggedAt = i + 1;
      assert.equal((await rowOf(healthy)).audit.verdict, 'ok', `healthy flagged at ${i + 1}`);
    }
    assert.ok(flaggedAt !== null, 'the liar was not flagged within 60 requests');
  });
});
