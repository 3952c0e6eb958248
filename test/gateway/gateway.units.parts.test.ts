/**
 * The gateway's parts on their own: SSE first-token detection, metrics parsing, config and flags,
 * API keys, and the KV event subscriber against a hand-driven ZMQ publisher (gaps, restarts, both
 * wire forms). `kvroute serve`'s bad flags as a user types them: gateway.units.badFlags.test.ts.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { Publisher, Router as ZmqRouter } from 'zeromq';
import { Flags, parseFlags } from '../../src/cli/args.ts';
import { readServeConfig } from '../../src/cli/serve.ts';
import { Authenticator } from '../../src/serving/auth.ts';
import {
  loadConfigFile,
  parseApiKeyFlag,
  parseBackendFlag,
  tenantOfKey,
} from '../../src/serving/config.ts';
import { toErrorResponse } from '../../src/serving/errors.ts';
import { parseEngineMetrics } from '../../src/serving/scraper.ts';
import { FirstTokenDetector } from '../../src/serving/firstToken.ts';
import { EventSubscriber } from '../../src/serving/subscriber.ts';
import { computeBlockKeys } from '../../src/kv/blockKey.ts';
import type { KvEvent } from '../../src/kv/events.ts';
import { END_SEQ_FRAME, encodeEventBatch, encodeSeq, type WireFormat } from '../../src/kv/wire.ts';
import type { ForeignKvEvent } from '../../src/router/index.ts';

const dir = await mkdtemp(join(tmpdir(), 'kvroute-gw-'));
after(() => rm(dir, { recursive: true, force: true }));

describe('FirstTokenDetector', () => {
  const chunk = (text: string) => Buffer.from(text);
  test('skips role-only and empty chunks, fires on the first content', () => {
    const d = new FirstTokenDetector();
    assert.equal(
      d.feed(chunk('data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n')),
      false,
    );
    assert.equal(d.feed(chunk(': comment\n\n')), false);
    assert.equal(d.feed(chunk('data: {"choices":[{"delta":{"content":"Hi"}}]}\n\n')), true);
    assert.equal(d.done, true);
    assert.equal(d.feed(chunk('data: {"choices":[{"delta":{"content":"again"}}]}\n\n')), false);
  });
  test('events split anywhere, CRLF, completions text, multi-byte characters', () => {
    const d = new FirstTokenDetector();
    const text = Buffer.from(
      'data: {"choices":[{"text":""}]}\r\n\r\ndata: {"choices":[{"text":"é✓"}]}\n\n',
    );
    let fired = -1;
    for (let i = 0; i < text.length; i++) if (d.feed(text.subarray(i, i + 1))) fired = i;
    assert.equal(fired, text.length - 1);
  });
  test('a finishing chunk counts even if its text is empty; [DONE] and errors do not', () => {
    const d = new FirstTokenDetector();
    assert.equal(d.feed(chunk('data: {"error":{"message":"x"}}\n\ndata: [DONE]\n\n')), false);
    assert.equal(
      d.feed(chunk('data: {"choices":[{"text":"","finish_reason":"length"}]}\n\n')),
      true,
    );
  });
});

describe('parseEngineMetrics', () => {
  test('reads the three gauges, summing counts over label sets', () => {
    const text = [
      '# HELP vllm:kv_cache_usage_perc KV usage',
      '# TYPE vllm:kv_cache_usage_perc gauge',
      'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25',
      'vllm:num_requests_running{engine="0",model_name="m"} 3',
      'vllm:num_requests_running{engine="1",model_name="m"} 2',
      'vllm:num_requests_waiting{engine="0",model_name="m"} 7 1700000000000',
      'vllm:num_requests_waiting_by_reason{reason="x"} 100',
      'vllm:prompt_tokens_total{engine="0"} 99',
    ].join('\n');
    assert.deepEqual(parseEngineMetrics(text), { kvUsage: 0.25, running: 5, waiting: 7 });
    assert.deepEqual(parseEngineMetrics('vllm:gpu_cache_usage_perc 0.5\n'), {
      kvUsage: 0.5,
      running: 0,
      waiting: 0,
    });
    assert.equal(parseEngineMetrics('something_else 1\n'), null);
  });
});

describe('config and flags', () => {
  test('a YAML file with backends, keys and tenants; flags override it', () => {
    const path = join(dir, 'kvroute.yaml');
    writeFileSync(
      path,
      [
        'port: 9000',
        'policy: dynamo',
        'index: approx',
        'stale-ms: 250',
        'backends:',
        '  - url: http://10.0.0.1:8000/',
        '    events: tcp://10.0.0.1:5557',
        '    replay: tcp://10.0.0.1:5558',
        '    model: llama',
        '    api-key: upstream-secret',
        '  - http://10.0.0.2:8000',
        'api-keys:',
        '  - key: sk-a',
        '    tenant: acme',
        '  - sk-b',
        'tenants:',
        '  acme: { cache-salt: acme-2024 }',
      ].join('\n'),
    );
    const config = loadConfigFile(path);
    assert.equal(config.port, 9000);
    assert.equal(config.policy, 'dynamo');
    assert.equal(config.index, 'approx');
    assert.equal(config.staleMs, 250);
    assert.deepEqual(config.backends[0], {
      url: 'http://10.0.0.1:8000',
      events: 'tcp://10.0.0.1:5557',
      replay: 'tcp://10.0.0.1:5558',
      model: 'llama',
      apiKey: 'upstream-secret',
    });
    assert.equal(config.backends[1]!.events, null);
    assert.deepEqual(config.apiKeys, [
      { key: 'sk-a', tenant: 'acme' },
      { key: 'sk-b', tenant: tenantOfKey('sk-b') },
    ]);
    assert.deepEqual(config.tenantSalts, { acme: 'acme-2024' });

    const spec = {
      config: { type: 'string' },
      port: { type: 'string' },
      policy: { type: 'string' },
      backend: { type: 'string', multiple: true },
      'api-key': { type: 'string', multiple: true },
      seed: { type: 'string' },
    } as const;
    const flags = new Flags(
      parseFlags(
        [
          '--config',
          path,
          '--port',
          '0',
          '--backend',
          'http://127.0.0.1:1,events=tcp://127.0.0.1:2',
          '--api-key',
          'k=t',
          '--seed',
          '7',
        ],
        spec,
      ),
    );
    const merged = readServeConfig(flags);
    assert.equal(merged.port, 0);
    assert.equal(merged.policy, 'dynamo');
    assert.equal(merged.backends.length, 1);
    assert.equal(merged.backends[0]!.events, 'tcp://127.0.0.1:2');
    assert.deepEqual(merged.apiKeys, [{ key: 'k', tenant: 't' }]);
    assert.equal(merged.seed, 7);
  });

  test('the example config at the repository root loads', () => {
    const config = loadConfigFile(new URL('../../kvroute.example.yaml', import.meta.url).pathname);
    assert.equal(config.backends.length, 2);
    assert.equal(config.apiKeys[0]!.tenant, 'acme');
    assert.equal(config.tenantSalts.acme, 'acme-2025');
  });

  test('config errors name the key; flag errors name the flag', () => {
    const bad = (yaml: string, pattern: RegExp) => {
      const path = join(dir, 'bad.yaml');
      writeFileSync(path, yaml);
      assert.throws(() => loadConfigFile(path), pattern);
    };
    bad('port: 70000', /config: port must be within/);
    bad('colour: blue', /config: colour is not a known key/);
    bad('backends:\n  - url: ftp://x', /config: backends\[0\]\.url must be an http/);
    bad(
      'backends:\n  - url: http://x\n    events: http://x',
      /backends\[0\]\.events must be a ZMQ endpoint/,
    );
    bad('index: both', /config: index must be one of events, approx/);
    bad('port: [1', /not valid YAML/);
    assert.throws(() => parseBackendFlag('nope'), /^GatewayError: --backend is not a URL/);
    assert.throws(
      () => parseBackendFlag('http://x,color=red'),
      /--backend has unknown option 'color'/,
    );
    assert.throws(() => parseApiKeyFlag(''), /--api-key must not be empty/);
  });
});

describe('Authenticator', () => {
  test('keys map to tenants and salts; without keys the tenant header names the tenant', () => {
    const auth = new Authenticator([{ key: 'sk-1', tenant: 'acme' }], { acme: 'salt-1' });
    assert.deepEqual(auth.authenticate('Bearer sk-1', 'other'), {
      tenant: 'acme',
      tenantSalt: 'salt-1',
    });
    assert.throws(() => auth.authenticate(undefined, undefined), { code: 'ERR_UNAUTHORIZED' });
    assert.throws(() => auth.authenticate('Bearer sk-2', undefined), { code: 'ERR_UNAUTHORIZED' });
    assert.throws(() => auth.authenticate('Basic sk-1', undefined), { code: 'ERR_UNAUTHORIZED' });
    const open = new Authenticator([], {});
    assert.deepEqual(open.authenticate(undefined, undefined), { tenant: null, tenantSalt: null });
    assert.deepEqual(open.authenticate(undefined, 'team-x'), {
      tenant: 'team-x',
      tenantSalt: 'tenant:team-x',
    });
  });
  test('errors become OpenAI JSON at the edge', () => {
    const auth = new Authenticator([{ key: 'k', tenant: 't' }], {});
    try {
      auth.authenticate(undefined, undefined);
      assert.fail('should throw');
    } catch (err) {
      const r = toErrorResponse(err);
      assert.equal(r.status, 401);
      assert.equal(r.headers['www-authenticate'], 'Bearer');
      assert.equal(JSON.parse(r.body).error.type, 'AuthenticationError');
    }
    assert.equal(toErrorResponse(new Error('boom')).status, 500);
    assert.equal(
      JSON.parse(toErrorResponse(new Error('secret')).body).error.message,
      'internal error',
    );
  });
});

describe('EventSubscriber against a hand-driven publisher', () => {
  for (const format of ['map', 'array'] as const satisfies readonly WireFormat[]) {
    test(`${format} form: in-order batches, a gap filled by replay, a restart`, async () => {
      const pub = new Publisher({ linger: 0 });
      await pub.bind('tcp://127.0.0.1:*');
      const replay = new ZmqRouter({ linger: 0 });
      await replay.bind('tcp://127.0.0.1:*');
      const sent = new Map<bigint, Buffer>();
      const replayRequests: bigint[] = [];
      const serving = (async () => {
        try {
          for await (const [identity, , start] of replay) {
            const from = start!.readBigUInt64BE(0);
            replayRequests.push(from);
            for (const [seq, payload] of sent) {
              if (seq >= from)
                await replay.send([identity!, Buffer.alloc(0), encodeSeq(seq), payload]);
            }
            await replay.send([identity!, Buffer.alloc(0), END_SEQ_FRAME, Buffer.alloc(0)]);
          }
        } catch {}
      })();
      const got: { replica: number; events: ForeignKvEvent[] }[] = [];
      let restarts = 0;
      const sub = new EventSubscriber(
        [{ replica: 0, events: pub.lastEndpoint!, replay: replay.lastEndpoint! }],
        {
          onEvents: (replica, events) => got.push({ replica, events }),
          onRestart: () => restarts++,
        },
      );
      sub.start();
      const tokens = Array.from({ length: 64 }, (_, i) => i + 1);
      const keys = computeBlockKeys(tokens, 16);
      const stored = (b: number): KvEvent => ({
        type: 'BlockStored',
        blockKeys: [keys[b]!],
        parentKey: b === 0 ? null : keys[b - 1]!,
        tokenIds: tokens.slice(b * 16, b * 16 + 16),
        blockSize: 16,
        loraName: null,
        cacheSalt: null,
      });
      const publish = async (seq: bigint, event: KvEvent, deliver = true) => {
        const payload = encodeEventBatch([event], { tsS: 1, format });
        sent.set(seq, payload);
        if (deliver) await pub.send([Buffer.alloc(0), encodeSeq(seq), payload]);
      };
      try {
        // The SUB joins asynchronously: publish seq 0 until it is seen (a late join would replay).
        await waitUntil(async () => {
          if (got.length === 0) await publish(0n, stored(0));
          return got.length > 0;
        });
        await publish(1n, stored(1));
        await publish(2n, stored(2), false); // lost on the wire
        await publish(3n, stored(3));
        // Late copies of the join loop's seq 0 may still arrive, so wait for what the batches
        // say (all four blocks, up to seq 3), not for a count of batches.
        const hashes = () =>
          got.flatMap((g) =>
            g.events.flatMap((e) => (e.type === 'BlockStored' ? e.blockHashes : [])),
          );
        await waitUntil(
          () => new Set(hashes().map(String)).size === 4 && sub.stats(0)?.lastSeq === '3',
        );
        assert.ok(replayRequests.includes(2n), `replay asked from ${replayRequests}`);
        assert.equal(new Set(hashes().map(String)).size, 4);
        assert.deepEqual(sub.stats(0)?.lastSeq, '3');
        assert.equal(sub.stats(0)?.gapsFilled, 1);
        // The engine restarts: its sequence starts again at 0.
        // (A late copy of the join loop's seq 0 may already have counted as one restart.)
        const restartsBefore = restarts;
        sent.clear();
        await publish(0n, { type: 'BlockRemoved', blockKeys: [keys[0]!] });
        await waitUntil(() => restarts > restartsBefore && sub.stats(0)?.lastSeq === '0');
        assert.equal(sub.stats(0)?.lastSeq, '0');
      } finally {
        await sub.close();
        pub.close();
        replay.close();
        await serving;
      }
    });
  }
});

async function waitUntil(
  probe: () => boolean | Promise<boolean>,
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}
