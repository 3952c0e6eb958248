/**
 * The engine and the gateway answer the same bad request with the same error body, vLLM's
 * `{"error": {message, type, param, code}}`, as the `openai` client reads it.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI, { type APIError } from 'openai';
import {
  type EngineServerHandle,
  type GatewayHandle,
  startEngines,
  startGatewayFor,
} from '../support/gateway.harness.ts';

let engine: EngineServerHandle;
let gw: GatewayHandle;

before(async () => {
  [engine] = (await startEngines(1, { speedup: 50 })) as [EngineServerHandle];
  gw = await startGatewayFor([engine]);
});

after(async () => {
  await gw?.close();
  await engine?.close();
});

const clientOf = (url: string) =>
  new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120_000 });

async function apiErrorOf(call: Promise<unknown>): Promise<APIError> {
  try {
    await call;
  } catch (err) {
    assert.ok(err instanceof OpenAI.APIError, String(err));
    return err;
  }
  assert.fail('the request succeeded');
}

test('the same bad requests get the same status and error object from both servers', async () => {
  const model = engine.servedModelName;
  const cases: [string, (c: OpenAI) => Promise<unknown>, string][] = [
    [
      'max_tokens 0',
      (c) => c.completions.create({ model, prompt: 'x', max_tokens: 0 }),
      'max_tokens',
    ],
    ['empty prompt', (c) => c.completions.create({ model, prompt: '' }), 'prompt'],
    [
      'out-of-vocabulary token id',
      (c) => c.completions.create({ model, prompt: [1, 10_000_000] }),
      'prompt',
    ],
    [
      'empty cache_salt',
      (c) =>
        c.completions.create({
          model,
          prompt: 'x',
          cache_salt: '',
        } as OpenAI.CompletionCreateParamsNonStreaming),
      'cache_salt',
    ],
    [
      'chat message without a role',
      (c) =>
        c.chat.completions.create({
          model,
          messages: [{ content: 'hi' } as OpenAI.ChatCompletionMessageParam],
        }),
      'messages',
    ],
    [
      'chat max_completion_tokens -1',
      (c) =>
        c.chat.completions.create({
          model,
          messages: [{ role: 'user', content: 'hi' }],
          max_completion_tokens: -1,
        }),
      'max_completion_tokens',
    ],
  ];
  const servedBefore = engine.counters().promptTokens;
  for (const [what, call, param] of cases) {
    const direct = await apiErrorOf(call(clientOf(engine.url)));
    const viaGateway = await apiErrorOf(call(clientOf(gw.url)));
    assert.ok(direct instanceof OpenAI.BadRequestError, what);
    assert.ok(viaGateway instanceof OpenAI.BadRequestError, what);
    assert.equal(direct.status, 400, what);
    assert.equal(viaGateway.status, 400, what);
    const error = direct.error as Record<string, unknown>;
    assert.deepEqual(Object.keys(error).sort(), ['code', 'message', 'param', 'type'], what);
    assert.equal(error.code, 400, what);
    assert.equal(error.type, 'BadRequestError', what);
    assert.equal(error.param, param, what);
    // The gateway refused it itself, with the very body the engine would have sent.
    assert.deepEqual(viaGateway.error, direct.error, what);
    assert.equal(viaGateway.headers?.get('x-kvroute-replica') ?? null, null, what);
  }
  assert.equal(engine.counters().promptTokens, servedBefore, 'nothing reached the engine core');
});

test('malformed JSON and an unknown route: same shape from both', async () => {
  for (const [path, init, status, type] of [
    ['/v1/completions', { method: 'POST', body: '{"prompt": ' }, 400, 'BadRequestError'],
    ['/v1/nothing', { method: 'GET' }, 404, 'NotFoundError'],
    ['/v1/completions', { method: 'GET' }, 405, 'MethodNotAllowedError'],
  ] as const) {
    const bodies = [];
    for (const base of [engine.url, gw.url]) {
      const res = await fetch(`${base}${path}`, init);
      assert.equal(res.status, status, `${base}${path}`);
      const body = (await res.json()) as { error: Record<string, unknown> };
      assert.deepEqual(Object.keys(body.error).sort(), ['code', 'message', 'param', 'type']);
      assert.equal(body.error.code, status);
      assert.equal(body.error.type, type);
      bodies.push(body);
    }
    assert.deepEqual(bodies[0], bodies[1], path);
  }
});
