/**
 * The engine's side of vLLM's P/D protocol. Expected field names and values are written from
 * vLLM's source, not from kvroute's encoder:
 * - the proxy's prefill request (tests/v1/kv_connector/nixl_integration/toy_proxy_server.py,
 *   send_request_to_service): kv_transfer_params {do_remote_decode: True, do_remote_prefill:
 *   False, remote_engine_id: None, remote_block_ids: None, remote_host: None, remote_port: None},
 *   stream False, max_tokens 1; then the decode request with the prefill response's
 *   kv_transfer_params;
 * - the prefiller's answer (nixl_connector.py, NixlConnectorScheduler.request_finished):
 *   dict(do_remote_prefill=True, do_remote_decode=False, remote_block_ids, remote_engine_id,
 *   remote_request_id, remote_host, remote_port, tp_size).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { parseKvTransferConfig } from '../../src/engine/connector/kvTransferConfig.ts';
import type { EngineServerHandle } from '../../src/engine/server/server.ts';
import { clientFor, startTestEngine, waitFor } from '../support/engineServerHelpers.ts';

const NIXL_FIELDS = [
  'do_remote_prefill',
  'do_remote_decode',
  'remote_block_ids',
  'remote_engine_id',
  'remote_request_id',
  'remote_host',
  'remote_port',
  'tp_size',
];

let prefill: EngineServerHandle;
let decode: EngineServerHandle;

before(async () => {
  // vLLM's own wire format: no secret, the side channel opened explicitly (no kvroute_mac).
  const base = {
    servedModelName: 'm',
    kvBlocks: 256,
    speedup: 1000,
    maxModelLen: 4096,
    kvTransferInsecure: true,
  };
  prefill = await startTestEngine({
    ...base,
    kvTransferConfig: parseKvTransferConfig(
      '{"kv_connector":"NixlConnector","kv_role":"kv_producer","engine_id":"prefill-0"}',
    ),
  });
  decode = await startTestEngine({
    ...base,
    kvTransferConfig: parseKvTransferConfig(null, [
      'kv_connector=NixlConnector',
      'kv_role=kv_consumer',
    ]),
  });
});

after(async () => {
  await prefill.close();
  await decode.close();
});

const PROMPT = Array.from({ length: 200 }, (_, i) => `w${i % 37}`).join(' ');

async function post(server: EngineServerHandle, body: object) {
  const res = await fetch(`${server.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  // biome-ignore lint/suspicious/noExplicitAny: answers of several shapes, read field by field
  const json = (await res.json()) as Record<string, any>;
  return { status: res.status, json };
}

/** The toy proxy's prefill request, field for field. */
function proxyPrefillBody(prompt: string) {
  return {
    model: 'm',
    prompt,
    max_tokens: 1,
    stream: false,
    kv_transfer_params: {
      do_remote_decode: true,
      do_remote_prefill: false,
      remote_engine_id: null,
      remote_block_ids: null,
      remote_host: null,
      remote_port: null,
    },
  };
}

test('--kv-transfer-config: JSON and dotted forms, vLLM roles', () => {
  const json = parseKvTransferConfig('{"kv_connector":"NixlConnector","kv_role":"kv_both"}');
  const dotted = parseKvTransferConfig(null, ['kv_connector=NixlConnector', 'kv_role=kv_both']);
  assert.deepEqual(json, dotted);
  assert.equal(json.kvRole, 'kv_both');
  assert.throws(
    () => parseKvTransferConfig('{"kv_connector":"NixlConnector"}'),
    /kv_role must be set/,
  );
  assert.throws(
    () => parseKvTransferConfig('{"kv_connector":"NixlConnector","kv_role":"prefill"}'),
    /Unsupported kv_role: prefill/,
  );
  assert.throws(
    () => parseKvTransferConfig('{"kv_connector":"P2pNcclConnector","kv_role":"kv_both"}'),
    /kv_connector must be one of NixlConnector/,
  );
  assert.throws(() => parseKvTransferConfig('[1]'), /must be a JSON object/);
});

test('the proxy protocol round trip: prefill holds, decode pulls, the prefiller frees', async () => {
  const p = await post(prefill, proxyPrefillBody(PROMPT));
  assert.equal(p.status, 200);
  assert.equal(p.json.usage.completion_tokens, 1);
  const params = p.json.kv_transfer_params;
  assert.deepEqual(Object.keys(params), NIXL_FIELDS);
  assert.equal(params.do_remote_prefill, true);
  assert.equal(params.do_remote_decode, false);
  assert.equal(params.remote_engine_id, 'prefill-0');
  assert.equal(params.remote_host, '127.0.0.1');
  assert.equal(params.remote_port, prefill.port);
  assert.equal(params.tp_size, 2);
  const promptTokens = p.json.usage.prompt_tokens as number;
  assert.equal(params.remote_block_ids.length, Math.ceil(promptTokens / 16));
  assert.equal(prefill.counters().kvTransfer!.heldBlocks, params.remote_block_ids.length);

  // The decode request: the client's request with the prefill answer's params (the proxy's).
  const d = await post(decode, {
    model: 'm',
    prompt: PROMPT,
    max_tokens: 20,
    kv_transfer_params: params,
  });
  assert.equal(d.status, 200);
  assert.equal(d.json.usage.completion_tokens, 20);
  assert.equal(d.json.usage.prompt_tokens, promptTokens);
  // Pulled blocks are computed, not cached.
  assert.equal(d.json.usage.prompt_tokens_details.cached_tokens, 0);
  const dc = decode.counters();
  assert.equal(dc.kvTransfer!.externalTokens, Math.floor((promptTokens - 1) / 16) * 16);
  assert.equal(dc.prefixCacheHitsTokens, 0);
  assert.equal(dc.kvTransfer!.injectedBlocks, 0);
  assert.equal(prefill.counters().kvTransfer!.heldBlocks, 0);
  assert.equal(prefill.counters().kvTransfer!.heldRequests, 0);

  // Blocks gone (already pulled): vLLM's fallback, the prompt computed on the decoder.
  const again = await post(decode, {
    model: 'm',
    prompt: `${PROMPT} x`,
    max_tokens: 5,
    kv_transfer_params: params,
  });
  assert.equal(again.status, 200);
  assert.equal(again.json.usage.completion_tokens, 5);
  assert.equal(decode.counters().kvTransfer!.externalTokens, dc.kvTransfer!.externalTokens);
});

test('the openai client passes the params through (extra body) and gets them back', async () => {
  const client = clientFor(prefill);
  const r = (await client.completions.create({
    model: 'm',
    prompt: PROMPT,
    max_tokens: 1,
    // @ts-expect-error: vLLM's extension field
    kv_transfer_params: { do_remote_decode: true },
  })) as unknown as { kv_transfer_params: Record<string, unknown> };
  assert.deepEqual(Object.keys(r.kv_transfer_params), NIXL_FIELDS);
  // Not pulled: the abort timeout would free it; release it here through the side channel.
  const res = await fetch(`${prefill.url}/nixl/done`, {
    method: 'POST',
    body: JSON.stringify({
      request_id: r.kv_transfer_params.remote_request_id,
      block_ids: r.kv_transfer_params.remote_block_ids,
    }),
  });
  assert.deepEqual(await res.json(), { released: true });
  assert.equal(prefill.counters().kvTransfer!.heldBlocks, 0);
});

test('a held prefill is freed after VLLM_NIXL_ABORT_REQUEST_TIMEOUT', async () => {
  const short = await startTestEngine({
    servedModelName: 'm',
    kvBlocks: 64,
    // The prompt's blocks pass the default per-client share of a 64-block pool (16).
    kvMaxHeldBlocksPerClient: 32,
    speedup: 1000,
    kvAbortTimeoutMs: 1_000,
    kvTransferInsecure: true,
    kvTransferConfig: parseKvTransferConfig('{"kv_connector":"NixlConnector","kv_role":"kv_both"}'),
  });
  try {
    const p = await post(short, proxyPrefillBody(PROMPT));
    assert.ok(p.json.kv_transfer_params.remote_block_ids.length > 0);
    await waitFor(
      () => short.counters().kvTransfer!.heldBlocks === 0,
      30_000,
      'the hold to expire',
    );
    assert.equal(short.counters().kvTransfer!.expiredHolds, 1);
    assert.equal(short.counters().kvUsage, 0);
  } finally {
    await short.close();
  }
});

test('bad kv_transfer_params: 400 naming the field', async () => {
  const cases: [unknown, string][] = [
    ['yes', 'kv_transfer_params'],
    [{ do_remote_decode: 'true' }, 'kv_transfer_params.do_remote_decode'],
    [{ do_remote_prefill: true, remote_block_ids: [1, -2] }, 'kv_transfer_params.remote_block_ids'],
    [
      { do_remote_prefill: true, remote_block_ids: [1], remote_port: 'x' },
      'kv_transfer_params.remote_port',
    ],
    [{ do_remote_prefill: true, remote_engine_id: 7 }, 'kv_transfer_params.remote_engine_id'],
    [{ do_remote_prefill: true, do_remote_decode: true }, 'kv_transfer_params.do_remote_prefill'],
  ];
  for (const [params, field] of cases) {
    const r = await post(decode, {
      model: 'm',
      prompt: 'hi',
      max_tokens: 2,
      kv_transfer_params: params,
    });
    assert.equal(r.status, 400, JSON.stringify(params));
    assert.equal(r.json.error.param, field);
    assert.equal(r.json.error.type, 'BadRequestError');
  }
  // What vLLM only warns about: do_remote_prefill without the pull's fields is computed here.
  const r = await post(decode, {
    model: 'm',
    prompt: 'hi',
    max_tokens: 2,
    kv_transfer_params: { do_remote_prefill: true },
  });
  assert.equal(r.status, 200);
  assert.equal(r.json.usage.completion_tokens, 2);
});

test('kvroute engine: --kv-transfer-config in JSON and dotted form; a bad one names the flag (exit 2)', async () => {
  const { runCli, spawnEngine } = await import('../support/cli.ts');
  const { child, readyLine } = await spawnEngine([
    '--port',
    '0',
    '--kv-transfer-config.kv_connector=NixlConnector',
    '--kv-transfer-config.kv_role',
    'kv_both',
    '--kv-transfer-gbps',
    '100',
    '--kv-transfer-insecure',
  ]);
  try {
    const url = /url=(\S+)/.exec(readyLine)?.[1];
    assert.ok(url, readyLine);
    const res = await fetch(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        prompt: 'hello there',
        max_tokens: 1,
        kv_transfer_params: { do_remote_decode: true },
      }),
    });
    const body = (await res.json()) as { kv_transfer_params: Record<string, unknown> };
    assert.deepEqual(Object.keys(body.kv_transfer_params), NIXL_FIELDS);
  } finally {
    child.kill('SIGTERM');
  }
  const bad = runCli([
    'engine',
    '--port',
    '0',
    '--kv-transfer-config',
    '{"kv_connector":"NixlConnector","kv_role":"decode"}',
  ]);
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--kv-transfer-config: Unsupported kv_role: decode/);
  const stray = runCli(['engine', '--port', '0', '--kv-transfer-gbps', '10']);
  assert.equal(stray.status, 2);
  assert.match(stray.stderr, /need --kv-transfer-config/);
});
