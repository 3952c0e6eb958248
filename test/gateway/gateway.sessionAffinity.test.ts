/**
 * Session affinity live: the gateway in front of two simulated engines that it treats as plain
 * OpenAI servers (no load report, no KV events: a cache the router cannot see), the openai client
 * sending conversations keyed by the session header, the body's `session_id` and its `user`.
 * Under round-robin a request without a key alternates; a keyed one stays on its replica.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import {
  type EngineServerHandle,
  type GatewayHandle,
  startEngines,
  startGatewayFor,
} from '../support/gateway.harness.ts';
import { readFlags } from '../../src/cli/args.ts';
import { readServeConfig } from '../../src/cli/serve.ts';
import { applyConfigDoc, defaultConfig, defaultSessionAffinity } from '../../src/serving/config.ts';

const MODEL = 'llama-3.3-70b';
const TURNS = 6;

describe('session affinity through the gateway', () => {
  let engines: EngineServerHandle[] = [];
  let gw: GatewayHandle;
  before(async () => {
    engines = await startEngines(2, { speedup: 1_000 });
    gw = await startGatewayFor(engines, {
      policy: 'round-robin',
      // Plain OpenAI servers to the gateway: no events, no load report, health from /v1/models.
      backends: engines.map((e) => ({
        url: e.url,
        events: null,
        replay: null,
        model: MODEL,
        apiKey: null,
        engine: 'openai' as const,
      })),
      sessionAffinity: { ...defaultSessionAffinity(), header: 'x-conversation' },
    });
  });
  after(async () => {
    await gw?.close();
    await Promise.all(engines.map((e) => e.close()));
  });

  const client = () =>
    new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });

  /** One chat turn; the replica that served it. */
  async function turn(
    i: number,
    extra: { header?: string; body?: Record<string, string> } = {},
  ): Promise<string> {
    const { response } = await client()
      .chat.completions.create(
        {
          model: MODEL,
          messages: [{ role: 'user', content: `turn ${i} of a conversation` }],
          max_tokens: 2,
          ...(extra.body as object),
        },
        extra.header === undefined ? {} : { headers: { 'x-conversation': extra.header } },
      )
      .withResponse();
    const replica = response.headers.get('x-kvroute-replica');
    assert.ok(replica, 'the replica header is present');
    return replica;
  }

  test('without a key round-robin alternates over both replicas', async () => {
    const seen = new Set<string>();
    for (let i = 0; i < 4; i++) seen.add(await turn(i));
    assert.equal(seen.size, 2);
  });

  test('a conversation keyed by the header stays on one replica', async () => {
    const served = [];
    for (let i = 0; i < TURNS; i++) served.push(await turn(i, { header: 'conv-a' }));
    assert.equal(new Set(served).size, 1, `served by ${served.join(', ')}`);
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    const kept = /kvroute_gateway_session_affinity_total\{outcome="kept"[^}]*\} (\d+)/.exec(
      metrics,
    );
    assert.ok(kept && Number(kept[1]) >= TURNS - 1, 'the kept turns are counted');
  });

  test("the body's session_id and user key conversations too, apart from each other", async () => {
    const byId = [];
    const byUser = [];
    for (let i = 0; i < TURNS; i++) {
      byId.push(await turn(i, { body: { session_id: 'conv-b' } }));
      byUser.push(await turn(i, { body: { user: 'alice' } }));
    }
    assert.equal(new Set(byId).size, 1, `session_id: ${byId.join(', ')}`);
    assert.equal(new Set(byUser).size, 1, `user: ${byUser.join(', ')}`);
  });

  test('a session_id that is not a string is a 400 naming the field, in the engine error shape', async () => {
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: 'user', content: 'hi' }],
        session_id: 7,
      }),
    });
    assert.equal(res.status, 400);
    const { error } = (await res.json()) as { error: Record<string, unknown> };
    assert.equal(error.type, 'BadRequestError');
    assert.equal(error.code, 400);
    assert.equal(error.param, 'session_id');
  });
});

describe('session affinity settings', () => {
  const flagsOf = (argv: string[]) => {
    const flags = readFlags(argv, {
      'session-affinity': { type: 'boolean' as const },
      'session-header': { type: 'string' as const },
      'session-slack-tokens': { type: 'string' as const },
      'session-max': { type: 'string' as const },
    });
    if (flags === 'help') throw new Error('unexpected help');
    return flags;
  };

  test('off by default; any session flag turns it on; bad values name the flag', () => {
    assert.equal(readServeConfig(flagsOf([])).sessionAffinity, null);
    assert.deepEqual(readServeConfig(flagsOf(['--session-affinity'])).sessionAffinity, {
      header: 'x-session-id',
      slackTokens: 4_096,
      capacity: 100_000,
    });
    const named = readServeConfig(flagsOf(['--session-header', 'X-Conv', '--session-max', '10']));
    assert.deepEqual(named.sessionAffinity, { header: 'x-conv', slackTokens: 4_096, capacity: 10 });
    assert.throws(() => readServeConfig(flagsOf(['--session-header', 'a b'])), /--session-header/);
    assert.throws(
      () => readServeConfig(flagsOf(['--session-slack-tokens', '-1'])),
      /--session-slack-tokens/,
    );
    assert.throws(() => readServeConfig(flagsOf(['--session-max', '0'])), /--session-max/);
  });

  test('the config file keys, and false turning it off', () => {
    const on = applyConfigDoc({ 'session-slack-tokens': 100 }, defaultConfig());
    assert.equal(on.sessionAffinity?.slackTokens, 100);
    assert.equal(applyConfigDoc({ 'session-affinity': false }, on).sessionAffinity, null);
    assert.throws(() => applyConfigDoc({ 'session-max': 0 }, defaultConfig()), /session-max/);
    assert.throws(() => applyConfigDoc({ 'session-affinity': 'yes' }, defaultConfig()));
  });
});
