/**
 * `kvroute engine --api-key` (and VLLM_API_KEY) as vLLM's AuthenticationMiddleware: /v1 paths
 * need `Authorization: Bearer KEY`, else 401 with vLLM's body; /health, /metrics, /tokenize,
 * /detokenize and OPTIONS stay open. The gateway's backend `api-key` authenticates against it.
 * vLLM flags that change who may call the server and that kvroute lacks are refused.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { ENGINE_FLAGS } from '../../src/cli/engineFlags.ts';
import { FLAGS } from '../../src/cli/engine.ts';
import { translateVllmArgs } from '../../src/cli/vllmFlags.ts';
import { apiKeysOf, UNAUTHORIZED_BODY } from '../../src/engine/server/auth.ts';
import { backendOf } from '../../src/embedded/fleet.ts';
import { defaultConfig } from '../../src/serving/config.ts';
import { type GatewayHandle, startGateway } from '../../src/gateway/gateway.ts';
import { type EngineServerHandle, startEngine } from '../support/gateway.harness.ts';

const MODEL = 'llama-3.3-70b';
const t = (argv: string[]) => translateVllmArgs(argv, { ...FLAGS, ...ENGINE_FLAGS });

describe('vLLM flags that change who may call the server', () => {
  test('--api-key takes several keys; VLLM_API_KEY only without it', () => {
    assert.deepEqual(t(['--api-key', 'k1', 'k2']).args, ['--api-key', 'k1', '--api-key', 'k2']);
    assert.deepEqual(t(['--api-key=k1']).args, ['--api-key', 'k1']);
    assert.deepEqual(apiKeysOf(['k1'], 'env'), ['k1']);
    assert.deepEqual(apiKeysOf([], 'env'), ['env']);
    assert.deepEqual(apiKeysOf([], ''), []);
    assert.deepEqual(apiKeysOf([], undefined), []);
  });

  test('TLS, CORS, a unix socket and middleware are refused in one line naming the flag', () => {
    for (const [argv, flag] of [
      [['--ssl-keyfile', 'k.pem'], '--ssl-keyfile'],
      [['--ssl-certfile', 'c.pem'], '--ssl-certfile'],
      [['--ssl-ca-certs', 'ca.pem'], '--ssl-ca-certs'],
      [['--ssl-cert-reqs', '2'], '--ssl-cert-reqs'],
      [['--allowed-origins', '["https://a"]'], '--allowed-origins'],
      [['--allow-credentials'], '--allow-credentials'],
      [['--uds', '/tmp/s'], '--uds'],
      [['--middleware', 'x.y'], '--middleware'],
    ] as const) {
      assert.throws(
        () => t([...argv]),
        (err: Error) => err.message.startsWith(`${flag} is not supported: `),
        flag,
      );
    }
    // --root-path and --disable-fastapi-docs only move or drop paths: still ignored.
    assert.match(
      t(['--root-path', '/api', '--disable-fastapi-docs']).warnings[0]!,
      /--root-path --disable-fastapi-docs$/,
    );
  });
});

describe('an engine started with API keys', () => {
  let engine: EngineServerHandle;
  let open: EngineServerHandle;
  let withKey: GatewayHandle;
  let withoutKey: GatewayHandle;

  before(async () => {
    engine = await startEngine({ speedup: 100, apiKeys: ['k1', 'k2'] });
    open = await startEngine({ speedup: 100 });
    withKey = await startGateway({
      ...defaultConfig(),
      port: 0,
      backends: [{ ...backendOf(engine), apiKey: 'k2' }],
    });
    withoutKey = await startGateway({
      ...defaultConfig(),
      port: 0,
      backends: [{ ...backendOf(engine), model: MODEL }],
    });
  });
  after(async () => {
    await withKey.close();
    await withoutKey.close();
    await engine.close();
    await open.close();
  });

  const call = (path: string, init: RequestInit = {}) => fetch(`${engine.url}${path}`, init);
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    call(path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });
  const completion = { model: MODEL, prompt: 'hello there', max_tokens: 2 };

  test('/v1 paths without a matching bearer key: 401 with vLLM body', async () => {
    for (const headers of <Record<string, string>[]>[
      {},
      { authorization: 'Bearer wrong' },
      { authorization: 'Basic k1' },
      { authorization: 'Bearer  k1' },
      { authorization: 'Bearerk1' },
    ]) {
      const res = await post('/v1/completions', completion, headers);
      assert.equal(res.status, 401, JSON.stringify(headers));
      assert.equal(res.headers.get('content-type'), 'application/json');
      assert.equal(await res.text(), UNAUTHORIZED_BODY);
    }
    // vLLM's middleware runs before routing: the path's existence is not revealed either.
    for (const path of ['/v1/models', '/v1/nope', '/v1']) {
      const res = await call(path);
      assert.equal(res.status, 401, path);
      assert.deepEqual(await res.json(), { error: 'Unauthorized' });
    }
  });

  test('either key, the scheme in any case, lets the request through', async () => {
    for (const authorization of ['Bearer k1', 'bearer k2', 'BEARER k1']) {
      const res = await post('/v1/completions', completion, { authorization });
      assert.equal(res.status, 200, authorization);
      await res.json();
    }
  });

  test('the paths vLLM leaves open stay open', async () => {
    assert.equal((await call('/health')).status, 200);
    assert.equal((await call('/metrics')).status, 200);
    assert.equal((await post('/tokenize', { model: MODEL, prompt: 'hi' })).status, 200);
    assert.equal((await post('/detokenize', { model: MODEL, tokens: [1, 2] })).status, 200);
    // OPTIONS skips the check (CORS preflight); the route table answers it.
    assert.notEqual((await call('/v1/models', { method: 'OPTIONS' })).status, 401);
  });

  test('the openai client: a wrong key is an AuthenticationError, the right one completes', async () => {
    const client = (apiKey: string) =>
      new OpenAI({ baseURL: `${engine.url}/v1`, apiKey, maxRetries: 0 });
    await assert.rejects(
      client('wrong').completions.create(completion),
      (err: unknown) => err instanceof OpenAI.AuthenticationError && err.status === 401,
    );
    const ok = await client('k1').completions.create(completion);
    assert.equal(ok.usage?.completion_tokens, 2);
    // Without keys the engine is open, as vLLM without --api-key.
    const anon = await new OpenAI({
      baseURL: `${open.url}/v1`,
      apiKey: 'anything',
      maxRetries: 0,
    }).completions.create(completion);
    assert.equal(anon.choices.length, 1);
  });

  test("the gateway's backend api-key authenticates against it", async () => {
    const through = (gw: GatewayHandle) =>
      new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'client-key', maxRetries: 0 });
    const res = await through(withKey).completions.create(completion);
    assert.equal(res.usage?.completion_tokens, 2);
    const chat = await through(withKey).chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'hi' }],
      max_tokens: 1,
    });
    assert.equal(chat.choices.length, 1);
    // The backend's own /v1/models (read with the key) names its model.
    const models = await through(withKey).models.list();
    assert.deepEqual(
      models.data.map((m) => m.id),
      [MODEL],
    );
    // Without the backend key, the client's own key goes upstream and is refused there.
    await assert.rejects(
      through(withoutKey).completions.create(completion),
      (err: unknown) => err instanceof OpenAI.AuthenticationError,
    );
  });
});
