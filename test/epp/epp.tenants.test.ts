/**
 * The endpoint picker with tenants, played from Envoy's side (test/support/envoy.ts): the
 * `x-kvroute-tenant` header names the tenant, whose salt and priority class are written into the
 * body forwarded to the engine, and whose limits answer 429 as an immediate response. And
 * `--pool-backends` read into backends, with the pool's event ports.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { flagSpec, readFlags } from '../../src/cli/args.ts';
import { readPoolBackends } from '../../src/cli/epp.ts';
import { startEppWithFleet } from '../../src/embedded/epp.ts';
import { defaultAdmission } from '../../src/serving/admissionConfig.ts';
import { defaultConfig } from '../../src/serving/config.ts';
import { within } from '../support/gateway.harness.ts';
import { EnvoyStream, envoyClient, httpBody, requestHeaders, setHeader } from '../support/envoy.ts';

const CHAT = '/v1/chat/completions';

/** The flags readPoolBackends reads, as `kvroute epp` declares them. */
const POOL_FLAGS = flagSpec({
  string: 'pool-events-port pool-replay-port',
  multiple: 'pool-backends',
});

describe('kvroute epp with tenants', () => {
  let epp: Awaited<ReturnType<typeof startEppWithFleet>>;
  let client: ReturnType<typeof envoyClient>;
  before(async () => {
    epp = await startEppWithFleet(
      {
        ...defaultConfig(),
        embeddedReplicas: 2,
        policy: 'cost',
        tenantSalts: { acme: 'salt-acme' },
        admission: {
          ...defaultAdmission(),
          priorityClasses: { batch: 10 },
          tenantPriority: { acme: 10 },
          tenantLimits: {
            acme: { requestsPerS: null, burst: null, concurrent: 1, promptTokensPerMin: null },
          },
        },
      },
      { port: 0, healthPort: 0, metricsPort: 0, embeddedSpeedup: 500 },
    );
    client = envoyClient(epp.address);
  });
  after(async () => {
    client?.close();
    await epp?.close();
  });

  /** Sends one request; returns the first answer and, when routed, the body to forward. */
  async function ask(tenant: string | null, body: object) {
    const stream = new EnvoyStream(client);
    stream.send(
      requestHeaders(CHAT, { ...(tenant !== null && { headers: { 'x-kvroute-tenant': tenant } }) }),
    );
    stream.send({ 4: httpBody(Buffer.from(JSON.stringify(body)), true) });
    const head = await within(120_000, stream.next(), 'the first answer');
    if (head.response !== 'request_headers') return { stream, head, forwarded: null };
    const chunks: Buffer[] = [];
    for (;;) {
      const r = await stream.next();
      assert.equal(r.response, 'request_body');
      const s = r.request_body.response.body_mutation.streamed_response;
      chunks.push(Buffer.from(s.body));
      if (s.end_of_stream) break;
    }
    return { stream, head, forwarded: JSON.parse(Buffer.concat(chunks).toString('utf8')) };
  }

  const chat = (text: string, extra: object = {}) => ({
    messages: [{ role: 'user', content: text }],
    max_tokens: 2,
    ...extra,
  });

  test("the tenant's salt and priority go into the forwarded body", async () => {
    const a = await ask('acme', chat('hello from acme'));
    assert.ok(setHeader(a.head.request_headers, 'x-gateway-destination-endpoint'));
    // tenantCacheSalt: a JSON array of the tenant's salt (and the request's own, when given).
    assert.equal(a.forwarded.cache_salt, '["salt-acme"]');
    assert.equal(a.forwarded.priority, 10, "acme's priority class, batch = 10");
    a.stream.cancel();
    await within(120_000, a.stream.status, 'the stream to end');

    const own = await ask('acme', chat('again', { cache_salt: 'mine' }));
    assert.equal(own.forwarded.cache_salt, '["salt-acme","mine"]');
    own.stream.cancel();
    await within(120_000, own.stream.status, 'the stream to end');

    // A tenant with no salt configured gets its default; no tenant, no salt and no priority.
    const other = await ask('beta', chat('hello from beta'));
    assert.equal(other.forwarded.cache_salt, '["tenant:beta"]');
    assert.equal(other.forwarded.priority, undefined);
    other.stream.cancel();
    const none = await ask(null, chat('hello from nobody'));
    assert.equal(none.forwarded.cache_salt, undefined);
    assert.equal(none.forwarded.priority, undefined);
    none.stream.cancel();
  });

  test("over the tenant's limit: an immediate 429 with an OpenAI-shaped body", async () => {
    // acme may have 1 request in flight: hold one open, the next is refused.
    const held = await ask('acme', chat('first, held open'));
    assert.ok(held.forwarded, 'the first is routed');
    const refused = await ask('acme', chat('second'));
    assert.equal(refused.head.response, 'immediate_response');
    const ir = refused.head.immediate_response;
    assert.equal(ir.status.code, 'TooManyRequests');
    const error = JSON.parse(Buffer.from(ir.body).toString('utf8')).error;
    assert.equal(error.code, 429);
    assert.equal(typeof error.message, 'string');
    // Another tenant is not held back by acme's limit.
    const beta = await ask('beta', chat('beta meanwhile'));
    assert.ok(beta.forwarded, 'beta is routed');
    beta.stream.cancel();
    // Once acme's request ends, acme is admitted again.
    held.stream.cancel();
    await within(120_000, held.stream.status, 'the held stream to end');
    let again = await ask('acme', chat('third'));
    for (let i = 0; i < 500 && again.forwarded === null; i++) {
      await new Promise((r) => setTimeout(r, 20));
      again = await ask('acme', chat(`third, try ${i}`));
    }
    assert.ok(again.forwarded, 'admitted after the held one was released');
    again.stream.cancel();
  });
});

test('--pool-backends: ip:port entries and URLs, with the pool event ports', () => {
  const flags = readFlags(
    [
      '--pool-backends',
      '10.0.0.5:8000,10.0.0.6:8001',
      '--pool-backends',
      'https://[fd00::7]:8443',
      '--pool-events-port',
      '5557',
      '--pool-replay-port',
      '5558',
    ],
    POOL_FLAGS,
  );
  assert.notEqual(flags, 'help');
  const backends = readPoolBackends(flags as Exclude<typeof flags, 'help'>);
  assert.deepEqual(
    backends.map((b) => [b.url, b.events, b.replay, b.apiKey]),
    [
      ['http://10.0.0.5:8000', 'tcp://10.0.0.5:5557', 'tcp://10.0.0.5:5558', null],
      ['http://10.0.0.6:8001', 'tcp://10.0.0.6:5557', 'tcp://10.0.0.6:5558', null],
      ['https://[fd00::7]:8443', 'tcp://[fd00::7]:5557', 'tcp://[fd00::7]:5558', null],
    ],
  );
  // Without the event ports: no events, no replay.
  const bare = readPoolBackends(
    readFlags(['--pool-backends', '10.0.0.5:8000'], POOL_FLAGS) as Exclude<typeof flags, 'help'>,
  );
  assert.deepEqual(
    bare.map((b) => [b.url, b.events, b.replay]),
    [['http://10.0.0.5:8000', null, null]],
  );
});
