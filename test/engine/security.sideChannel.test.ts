/**
 * The engines' P/D trust boundary (docs/security.md): the transfer side channel
 * (`/nixl/pull`, `/nixl/done`) needs the fleet's secret, names nothing when it refuses, and
 * knows held transfers only by random handles; a decode engine pulls only params a prefiller of
 * its fleet emitted (their MAC verifies) and contacts no host a client named; blocks held for
 * remote decodes are bounded in all and per client.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { readEngineArgv, readEngineOptions } from '../../src/cli/engine.ts';
import { parseKvTransferConfig } from '../../src/engine/connector/kvTransferConfig.ts';
import { NixlConnectorCore } from '../../src/engine/connector/nixl.ts';
import { TransferSecret } from '../../src/engine/connector/secret.ts';
import { BlockPool } from '../../src/kv/blockPool.ts';
import type { EngineServerHandle } from '../../src/engine/server/server.ts';
import { backendOf } from '../../src/embedded/fleet.ts';
import { filler, startTestEngine } from '../support/engineServerHelpers.ts';
import { replicas, startGatewayFor, waitFor } from '../support/gateway.harness.ts';

const KEY = 'fleet-key';
const AUTH = { authorization: `Bearer ${KEY}` };
// At speedup 1000 vLLM's 480 s abort timeout is half a second of wall time: keep holds here
// until the tests free them.
const BASE = {
  servedModelName: 'm',
  kvBlocks: 256,
  speedup: 1000,
  maxModelLen: 4096,
  kvAbortTimeoutMs: 1e8,
};
const nixl = (role: string, id?: string) =>
  parseKvTransferConfig(
    JSON.stringify({
      kv_connector: 'NixlConnector',
      kv_role: role,
      ...(id !== undefined && { engine_id: id }),
    }),
  );

let prefill: EngineServerHandle;
let decode: EngineServerHandle;
/** A listener a forged `remote_host`/`remote_port` points at: it must hear nothing. */
let ssrf: Server;
let ssrfHits = 0;

before(async () => {
  // The engines share the secret the natural way: the same --api-key.
  prefill = await startTestEngine({
    ...BASE,
    apiKeys: [KEY],
    kvTransferConfig: nixl('kv_producer', 'prefill-0'),
  });
  decode = await startTestEngine({
    ...BASE,
    apiKeys: [KEY],
    kvTransferConfig: nixl('kv_consumer'),
  });
  ssrf = createServer((req, res) => {
    ssrfHits++;
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"blocks":1,"released":true}');
  });
  await new Promise<void>((resolve) => ssrf.listen(0, '127.0.0.1', resolve));
});

after(async () => {
  await prefill.close();
  await decode.close();
  ssrf.close();
});

type Json = Record<string, unknown>;

async function post(
  url: string,
  body: object,
  headers: Record<string, string> = AUTH,
): Promise<{ status: number; text: string; json: Json }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let json: Json = {};
  try {
    json = JSON.parse(text) as Json;
  } catch {
    // not JSON: the text is enough
  }
  return { status: res.status, text, json };
}

const PROMPT = filler(120, 7);

/** A prefill that keeps its blocks for a remote decode; its answer's params. */
async function holdOn(
  server: EngineServerHandle,
  prompt = PROMPT,
  headers: Record<string, string> = AUTH,
) {
  const r = await post(
    `${server.url}/v1/completions`,
    { model: 'm', prompt, max_tokens: 1, kv_transfer_params: { do_remote_decode: true } },
    headers,
  );
  assert.equal(r.status, 200, r.text);
  return r.json.kv_transfer_params as Json | null;
}

const held = (s: EngineServerHandle) => s.counters().kvTransfer!.heldBlocks;

test('the side channel refuses a call without the secret (401), and takes one with it', async () => {
  const params = (await holdOn(prefill))!;
  const call = {
    engine_id: params.remote_engine_id,
    request_id: params.remote_request_id,
    block_ids: params.remote_block_ids,
  };
  const refused: Record<string, string>[] = [
    {},
    { authorization: 'Bearer wrong' },
    { authorization: KEY },
  ];
  for (const headers of refused) {
    for (const path of ['/nixl/pull', '/nixl/done']) {
      const r = await post(`${prefill.url}${path}`, call, headers);
      assert.equal(r.status, 401, `${path} ${JSON.stringify(headers)}`);
      assert.deepEqual(r.json, { error: 'Unauthorized' });
    }
  }
  assert.equal(held(prefill), (params.remote_block_ids as number[]).length);
  const ok = await post(`${prefill.url}/nixl/pull`, call);
  assert.equal(ok.status, 200);
  const done = await post(`${prefill.url}/nixl/done`, call);
  assert.deepEqual(done.json, { released: true });
  assert.equal(held(prefill), 0);
});

test('handles are random: xfer- and 128 bits of hex, never the request id, none alike', async () => {
  const seen = new Set<string>();
  for (let i = 0; i < 4; i++) {
    const params = (await holdOn(prefill, `${PROMPT} ${i}`))!;
    const handle = params.remote_request_id as string;
    assert.match(handle, /^xfer-[0-9a-f]{32}$/);
    assert.ok(!seen.has(handle));
    seen.add(handle);
    const call = { request_id: handle, block_ids: params.remote_block_ids };
    assert.equal((await post(`${prefill.url}/nixl/done`, call)).status, 200);
  }
  assert.equal(held(prefill), 0);
});

test('done with a guessed id frees nothing, even with the secret and the right block ids', async () => {
  const params = (await holdOn(prefill))!;
  const blockIds = params.remote_block_ids as number[];
  for (let n = 0; n <= 64; n++) {
    for (const id of [`req-${n}`, `cmpl-${n}`, String(n)]) {
      const r = await post(`${prefill.url}/nixl/done`, { request_id: id, block_ids: blockIds });
      assert.equal(r.status, 404, id);
    }
  }
  assert.equal(held(prefill), blockIds.length);
  await post(`${prefill.url}/nixl/done`, {
    request_id: params.remote_request_id,
    block_ids: blockIds,
  });
});

test('a wrong engine id, an unknown handle or other block ids: the same 404, naming nothing', async () => {
  const params = (await holdOn(prefill))!;
  const handle = params.remote_request_id as string;
  const blockIds = params.remote_block_ids as number[];
  const bodies = new Set<string>();
  for (const call of [
    { engine_id: 'other-engine', request_id: handle, block_ids: blockIds },
    { engine_id: 'prefill-0', request_id: 'xfer-0000', block_ids: blockIds },
    { engine_id: 'prefill-0', request_id: handle, block_ids: [...blockIds, 0] },
  ]) {
    for (const path of ['/nixl/pull', '/nixl/done']) {
      const r = await post(`${prefill.url}${path}`, call);
      assert.equal(r.status, 404, `${path} ${JSON.stringify(call)}`);
      for (const secret of ['prefill-0', handle, 'other-engine', 'xfer-0000'])
        assert.ok(!r.text.includes(secret), r.text);
      bodies.add(r.text);
    }
  }
  assert.equal(bodies.size, 1, [...bodies].join(' | '));
  assert.equal(held(prefill), blockIds.length);
  await post(`${prefill.url}/nixl/done`, { request_id: handle, block_ids: blockIds });
});

test('forged params to a decode engine: 400, and the host they name hears nothing', async () => {
  const forged = {
    do_remote_prefill: true,
    do_remote_decode: false,
    remote_block_ids: [1, 2, 3],
    remote_engine_id: 'prefill-0',
    remote_request_id: 'req-1',
    remote_host: '127.0.0.1',
    remote_port: (ssrf.address() as AddressInfo).port,
    tp_size: 2,
  };
  for (const params of [forged, { ...forged, kvroute_mac: 'ab'.repeat(32) }]) {
    const r = await post(`${decode.url}/v1/completions`, {
      model: 'm',
      prompt: PROMPT,
      max_tokens: 2,
      kv_transfer_params: params,
    });
    assert.equal(r.status, 400, r.text);
    assert.equal((r.json.error as Json).type, 'BadRequestError');
    assert.equal((r.json.error as Json).param, 'kv_transfer_params');
  }
  assert.equal(ssrfHits, 0);
});

test("another request naming a victim's handle leaves its blocks held; the victim's own params pull them", async () => {
  const victim = (await holdOn(prefill))!;
  const blockIds = victim.remote_block_ids as number[];
  const { kvroute_mac: mac, ...withoutMac } = victim;
  assert.match(String(mac), /^[0-9a-f]{64}$/);
  const tampered = [
    withoutMac,
    { ...victim, remote_block_ids: blockIds.slice(1) },
    { ...victim, remote_port: (ssrf.address() as AddressInfo).port },
    { ...victim, tp_size: 1 },
  ];
  for (const params of tampered) {
    const r = await post(`${decode.url}/v1/completions`, {
      model: 'm',
      prompt: PROMPT,
      max_tokens: 2,
      kv_transfer_params: params,
    });
    assert.equal(r.status, 400, JSON.stringify(params));
  }
  assert.equal(held(prefill), blockIds.length);
  assert.equal(ssrfHits, 0);
  // The real flow: the prefill answer's params, as the gateway passes them, pull the blocks.
  const r = await post(`${decode.url}/v1/completions`, {
    model: 'm',
    prompt: PROMPT,
    max_tokens: 4,
    kv_transfer_params: victim,
  });
  assert.equal(r.status, 200, r.text);
  assert.equal(held(prefill), 0);
  assert.ok(decode.counters().kvTransfer!.externalTokens > 0);
});

test('a hold flood stays under the bounds; others still hold, and a normal request is served', async () => {
  // 64 blocks: at most 32 held in all (half the pool), 16 per client (half of that).
  const small = await startTestEngine({
    servedModelName: 'm',
    kvBlocks: 64,
    speedup: 1000,
    maxModelLen: 1024,
    kvAbortTimeoutMs: 1e8,
    apiKeys: ['tenant-a', 'tenant-b'],
    kvTransferConfig: nixl('kv_both'),
  });
  try {
    const a = { authorization: 'Bearer tenant-a' };
    const b = { authorization: 'Bearer tenant-b' };
    let refused = 0;
    for (let i = 0; i < 24; i++) {
      const params = await holdOn(small, filler(40, 100 + i), a);
      if (params === null) refused++;
      assert.ok(held(small) <= 16, `held ${held(small)} after ${i + 1}`);
    }
    // The scheme's spelling does not make another client.
    assert.equal(await holdOn(small, filler(40, 500), { authorization: 'BEARER tenant-a' }), null);
    refused++;
    assert.ok(refused > 1);
    assert.equal(small.counters().kvTransfer!.refusedHolds, refused);
    // Another client still has its share.
    assert.notEqual(await holdOn(small, filler(40, 999), b), null);
    assert.ok(held(small) <= 32);
    assert.ok(small.counters().kvUsage <= 0.5, `kvUsage ${small.counters().kvUsage}`);
    // A normal request that needs more than half the pool is served (not starved).
    const r = await fetch(`${small.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...b },
      body: JSON.stringify({ model: 'm', prompt: filler(300, 5), max_tokens: 8 }),
      // A bound on the test, not an assertion on time: without the bounds this never answers.
      signal: AbortSignal.timeout(15_000),
    });
    assert.equal(r.status, 200);
    const body = (await r.json()) as { usage: { completion_tokens: number } };
    assert.equal(body.usage.completion_tokens, 8);
  } finally {
    await small.close();
  }
});

test('the secret comes from --kv-transfer-secret-file or KVROUTE_KV_TRANSFER_SECRET; bounds from flags', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-secret-'));
  const file = join(dir, 'secret');
  writeFileSync(file, 'from-file\n');
  const read = (argv: string[]) => {
    const { flags } = readEngineArgv(argv);
    assert.notEqual(flags, 'help');
    return readEngineOptions(flags as Exclude<typeof flags, 'help'>);
  };
  const config = ['--kv-transfer-config', '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'];
  const o = read([
    ...config,
    '--kv-transfer-secret-file',
    file,
    '--kv-max-held-blocks',
    '100',
    '--kv-max-held-blocks-per-client',
    '10',
  ]);
  assert.equal(o.kvTransferSecret, 'from-file');
  assert.equal(o.kvMaxHeldBlocks, 100);
  assert.equal(o.kvMaxHeldBlocksPerClient, 10);
  const before = process.env.KVROUTE_KV_TRANSFER_SECRET;
  process.env.KVROUTE_KV_TRANSFER_SECRET = 'from-env';
  try {
    assert.equal(read(config).kvTransferSecret, 'from-env');
  } finally {
    if (before === undefined) delete process.env.KVROUTE_KV_TRANSFER_SECRET;
    else process.env.KVROUTE_KV_TRANSFER_SECRET = before;
  }
  // A secret of its own wins over the API key: the key alone is refused on the side channel.
  const own = await startTestEngine({
    ...BASE,
    apiKeys: [KEY],
    kvTransferSecret: 'side-secret',
    kvTransferConfig: nixl('kv_both'),
  });
  try {
    const call = { request_id: 'xfer-0', block_ids: [] };
    assert.equal((await post(`${own.url}/nixl/pull`, call)).status, 401);
    const r = await post(`${own.url}/nixl/pull`, call, { authorization: 'Bearer side-secret' });
    assert.equal(r.status, 404);
  } finally {
    await own.close();
  }
});

test('P/D through the gateway works when the engines share the API key (the secret)', async () => {
  const gw = await startGatewayFor([prefill, decode], {
    backends: [
      { ...backendOf(prefill), apiKey: KEY, role: 'prefill' },
      { ...backendOf(decode), apiKey: KEY, role: 'decode' },
    ],
  });
  try {
    await waitFor(async () => (await replicas(gw)).every((r) => r.healthy), 'replicas healthy');
    const external0 = decode.counters().kvTransfer!.externalTokens;
    for (let i = 0; i < 2; i++) {
      const r = await post(`${gw.url}/v1/completions`, {
        model: 'm',
        prompt: `${filler(200, 40 + i)}`,
        max_tokens: 6,
      });
      assert.equal(r.status, 200, r.text);
      assert.equal((r.json.usage as Json).completion_tokens, 6);
    }
    // The prompts came over the link (pulled with the secret), not computed on the decoder.
    assert.ok(decode.counters().kvTransfer!.externalTokens - external0 >= 2 * 16);
    await waitFor(() => held(prefill) === 0, 'holds freed');
  } finally {
    await gw.close();
  }
});

test('the connector core: holds past the total or the per-client bound are not taken; a release frees the share', () => {
  const pool = new BlockPool({ numBlocks: 40, blockSize: 4 });
  const c = new NixlConnectorCore(pool, 1_000, { maxHeldBlocks: 12, maxHeldBlocksPerClient: 8 });
  assert.equal(c.hold('a1', [], 16, 'a')?.length, 4);
  assert.equal(c.hold('a2', [], 16, 'a')?.length, 4);
  assert.equal(c.hold('a3', [], 4, 'a'), null); // a holds 8 of its 8
  assert.equal(c.hold('b1', [], 16, 'b')?.length, 4);
  assert.equal(c.hold('b2', [], 8, 'b'), null); // 12 of 12 in all
  assert.equal(c.refusedHolds, 2);
  assert.equal(c.heldBlocks, 12);
  assert.ok(c.release('a1'));
  assert.equal(c.hold('a3', [], 16, 'a')?.length, 4);
  // Unbounded without bounds (the simulator's fleet).
  const open = new NixlConnectorCore(new BlockPool({ numBlocks: 40, blockSize: 4 }));
  assert.equal(open.hold('x', [], 120, 'a')?.length, 30);
});

test('the MAC binds every field a pull uses; another secret does not verify', () => {
  const secret = new TransferSecret('s1');
  const p = {
    engineId: 'e',
    requestId: 'xfer-1',
    host: '10.0.0.1',
    port: 8100,
    blockIds: [1, 2],
    tpSize: 2,
  };
  const mac = secret.mac(p);
  assert.ok(secret.verifies(p, mac));
  for (const changed of [
    { ...p, engineId: 'f' },
    { ...p, requestId: 'xfer-2' },
    { ...p, host: '10.0.0.2' },
    { ...p, port: 8101 },
    { ...p, blockIds: [1, 3] },
    { ...p, tpSize: 1 },
  ]) {
    assert.equal(secret.verifies(changed, mac), false, JSON.stringify(changed));
  }
  assert.equal(new TransferSecret('s2').verifies(p, mac), false);
  assert.equal(secret.verifies(p, null), false);
  assert.equal(secret.verifies(p, 'zz'), false);
});

test('no secret: the side channel is closed (403 to every call), nothing held, nothing pulled', async () => {
  const closed = await startTestEngine({ ...BASE, kvTransferConfig: nixl('kv_both') });
  ssrfHits = 0;
  try {
    // Every call, however formed, gets the same 403 and body.
    const answers = new Set<string>();
    for (const [path, body, headers] of [
      ['/nixl/pull', { request_id: 'xfer-0', block_ids: [] }, {}],
      ['/nixl/done', { request_id: 'xfer-0', block_ids: [1, 2] }, {}],
      ['/nixl/pull', {}, AUTH],
      ['/nixl/done', { engine_id: 'x', request_id: 'req-1', block_ids: [0] }, AUTH],
    ] as const) {
      const r = await post(`${closed.url}${path}`, body, headers);
      answers.add(`${r.status} ${r.text}`);
    }
    assert.deepEqual([...answers], ['403 {"error":"Forbidden"}']);
    // A prefill for a remote decode is served, holds nothing and says so (params null).
    assert.equal(await holdOn(closed, PROMPT, {}), null);
    assert.equal(held(closed), 0);
    // A decode with pull params contacts no one and computes the prompt.
    const port = (ssrf.address() as AddressInfo).port;
    const r = await post(
      `${closed.url}/v1/completions`,
      {
        model: 'm',
        prompt: PROMPT,
        max_tokens: 2,
        kv_transfer_params: {
          do_remote_prefill: true,
          remote_engine_id: 'e',
          remote_request_id: 'xfer-1',
          remote_block_ids: [0, 1],
          remote_host: '127.0.0.1',
          remote_port: port,
          tp_size: 1,
        },
      },
      {},
    );
    assert.equal(r.status, 200, r.text);
    assert.equal(ssrfHits, 0, 'the decode engine called the host the params named');
    assert.equal(closed.counters().kvTransfer!.externalTokens, 0);
  } finally {
    await closed.close();
  }
});

test('--kv-transfer-insecure opens it explicitly; without --kv-transfer-config it is refused', async () => {
  const { flags } = readEngineArgv([
    '--kv-transfer-config',
    '{"kv_connector":"NixlConnector","kv_role":"kv_both"}',
    '--kv-transfer-insecure',
  ]);
  assert.notEqual(flags, 'help');
  assert.equal(readEngineOptions(flags as Exclude<typeof flags, 'help'>).kvTransferInsecure, true);
  const { flags: stray } = readEngineArgv(['--kv-transfer-insecure']);
  assert.throws(
    () => readEngineOptions(stray as Exclude<typeof stray, 'help'>),
    /--kv-transfer-insecure needs --kv-transfer-config/,
  );
  const open = await startTestEngine({
    ...BASE,
    kvTransferInsecure: true,
    kvTransferConfig: nixl('kv_both'),
  });
  try {
    const params = (await holdOn(open, PROMPT, {}))!;
    assert.ok(params !== null && Array.isArray(params.remote_block_ids));
    const call = {
      engine_id: params.remote_engine_id,
      request_id: params.remote_request_id,
      block_ids: params.remote_block_ids,
    };
    assert.equal((await post(`${open.url}/nixl/pull`, call, {})).status, 200);
  } finally {
    await open.close();
  }
});
