/**
 * Who may read what: `/router/replicas` (every replica's internal state) needs the admin key once
 * keys are configured, a tenant's key is refused with 403; `/metrics` stays open unless a metrics
 * key or client keys are given. Flags and the config file set both keys.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { readServeConfig } from '../../src/cli/serve.ts';
import { readFlags } from '../../src/cli/args.ts';
import { applyConfigDoc, defaultConfig } from '../../src/serving/config.ts';
import {
  type EngineServerHandle,
  type GatewayHandle,
  startEngines,
  startGatewayFor,
} from '../support/gateway.harness.ts';

const get = async (url: string, key?: string) => {
  const res = await fetch(url, key ? { headers: { authorization: `Bearer ${key}` } } : {});
  const text = await res.text();
  return { status: res.status, text };
};

describe('admin and metrics keys', () => {
  let engines: EngineServerHandle[] = [];
  let withAdmin: GatewayHandle;
  let keysOnly: GatewayHandle;
  let open: GatewayHandle;
  before(async () => {
    engines = await startEngines(1, { speedup: 50 });
    const apiKeys = [{ key: 'sk-tenant', tenant: 't' }];
    withAdmin = await startGatewayFor(engines, {
      apiKeys,
      adminKey: 'sk-admin',
      metricsKey: 'sk-metrics',
    });
    keysOnly = await startGatewayFor(engines, { apiKeys });
    open = await startGatewayFor(engines);
  });
  after(async () => {
    await Promise.all([withAdmin, keysOnly, open].map((g) => g?.close()));
    await Promise.all(engines.map((e) => e.close()));
  });

  test('/router/replicas needs the admin key: 401 without a key, 403 with a tenant key', async () => {
    const url = `${withAdmin.url}/router/replicas`;
    const none = await get(url);
    assert.equal(none.status, 401);
    assert.equal(JSON.parse(none.text).error.type, 'AuthenticationError');
    const tenant = await get(url, 'sk-tenant');
    assert.equal(tenant.status, 403, tenant.text);
    assert.deepEqual(Object.keys(JSON.parse(tenant.text).error).sort(), [
      'code',
      'message',
      'param',
      'type',
    ]);
    assert.equal(JSON.parse(tenant.text).error.type, 'PermissionDeniedError');
    assert.equal(JSON.parse(tenant.text).error.code, 403);
    assert.doesNotMatch(tenant.text, /replicas|127\.0\.0\.1/);
    assert.equal((await get(url, 'sk-wrong')).status, 401);
    assert.equal((await get(url, 'sk-metrics')).status, 401);
    const admin = await get(url, 'sk-admin');
    assert.equal(admin.status, 200);
    assert.equal(JSON.parse(admin.text).replicas.length, 1);
    // The openai client names a 403 as such.
    const client = new OpenAI({ baseURL: withAdmin.url, apiKey: 'sk-tenant', maxRetries: 0 });
    await assert.rejects(client.get('/router/replicas'), OpenAI.PermissionDeniedError);
  });

  test('with client keys and no admin key, no tenant reads /router/replicas', async () => {
    assert.equal((await get(`${keysOnly.url}/router/replicas`, 'sk-tenant')).status, 403);
    assert.equal((await get(`${keysOnly.url}/router/replicas`)).status, 401);
  });

  test('/metrics is open unless a metrics key is set; then it or the admin key reads it', async () => {
    // Client keys close it too (its labels name tenants): no tenant reads it.
    assert.equal((await get(`${keysOnly.url}/metrics`)).status, 401);
    assert.equal((await get(`${keysOnly.url}/metrics`, 'sk-tenant')).status, 403);
    assert.equal((await get(`${open.url}/metrics`)).status, 200);
    assert.equal((await get(`${open.url}/router/replicas`)).status, 200);
    const url = `${withAdmin.url}/metrics`;
    assert.equal((await get(url)).status, 401);
    assert.equal((await get(url, 'sk-tenant')).status, 403);
    const ok = await get(url, 'sk-metrics');
    assert.equal(ok.status, 200);
    assert.match(ok.text, /kvroute_gateway_requests_total/);
    assert.equal((await get(url, 'sk-admin')).status, 200);
  });

  test('tenants still generate with their keys', async () => {
    const res = await fetch(`${withAdmin.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-tenant' },
      body: JSON.stringify({ prompt: 'hello', max_tokens: 1 }),
    });
    assert.equal(res.status, 200);
  });
});

describe('admin and metrics keys in flags and the config file', () => {
  test('--admin-key and --metrics-key; empty values are refused', () => {
    const config = readServeConfig(readFlagsOf(['--admin-key', 'A', '--metrics-key', 'M']));
    assert.equal(config.adminKey, 'A');
    assert.equal(config.metricsKey, 'M');
    assert.throws(() => readServeConfig(readFlagsOf(['--admin-key', ''])), /--admin-key/);
  });

  test('admin-key and metrics-key in YAML', () => {
    const config = applyConfigDoc(
      { 'admin-key': 'A', 'metrics-key': 'M', 'first-byte-timeout-ms': 5000 },
      defaultConfig(),
    );
    assert.equal(config.adminKey, 'A');
    assert.equal(config.metricsKey, 'M');
    assert.equal(config.firstByteTimeoutMs, 5000);
    assert.throws(() => applyConfigDoc({ 'admin-key': '' }, defaultConfig()), /admin-key/);
    assert.throws(() => applyConfigDoc({ 'metrics-key': 5 }, defaultConfig()), /metrics-key/);
  });
});

/** The serve command's own flag table, through its public reader. */
function readFlagsOf(argv: string[]) {
  const spec = {
    'admin-key': { type: 'string' as const },
    'metrics-key': { type: 'string' as const },
  };
  const flags = readFlags(argv, spec);
  if (flags === 'help') throw new Error('unexpected help');
  return flags;
}
