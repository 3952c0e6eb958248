/**
 * Tenant salts: written into the forwarded body without re-serializing it (a body nested 5,000
 * deep is served, not a 500), and combined with a request's own salt one-to-one (tenant `a` with
 * salt `b/x` never reads tenant `a/b`'s entries with salt `x`).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { tenantCacheSalt, withCacheSalt } from '../../src/serving/cacheSalt.ts';
import {
  complete,
  type EngineServerHandle,
  type GatewayHandle,
  startEngines,
  startGatewayFor,
  tokens,
  waitFor,
} from '../support/gateway.harness.ts';

const MODEL = 'llama-3.3-70b';

describe('withCacheSalt', () => {
  const salted = (body: string, salt = 'S') =>
    withCacheSalt(Buffer.from(body), salt).toString('utf8');

  test('inserts the salt first, or replaces every top-level cache_salt', () => {
    assert.equal(salted('{"prompt":"x"}'), '{"cache_salt":"S","prompt":"x"}');
    assert.equal(salted(' { } '), ' {"cache_salt":"S" } ');
    assert.equal(
      salted('{"cache_salt": "mine", "prompt": [1, 2], "cache_salt" :"again"}'),
      '{"cache_salt": "S", "prompt": [1, 2], "cache_salt" :"S"}',
    );
    // An escaped spelling of the key is the same key to a parser.
    assert.equal(salted('{"cache\\u005fsalt":"m"}'), '{"cache\\u005fsalt":"S"}');
    // Nested cache_salt keys and look-alike strings are not the top-level field.
    const nested = '{"x":{"cache_salt":"n"},"y":["\\"cache_salt\\":1"],"prompt":"]}"}';
    assert.deepEqual(JSON.parse(salted(nested)), {
      cache_salt: 'S',
      ...JSON.parse(nested),
    });
    assert.equal(salted('{"a":1}', 'q"\\'), '{"cache_salt":"q\\"\\\\","a":1}');
  });

  test('leaves every other byte as sent, at any depth, without recursion', () => {
    const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    const body = `{"prompt":"x","deep":${deep},"n":1.50e0}`;
    const out = salted(body);
    assert.equal(out, `{"cache_salt":"S",${body.slice(1)}`);
  });

  test('property: the parsed result is the input with cache_salt set', () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.string(), fc.jsonValue(), { maxKeys: 6 }),
        fc.string(),
        (obj, salt) => {
          const out = JSON.parse(withCacheSalt(Buffer.from(JSON.stringify(obj)), salt).toString());
          // Through JSON once, as the client's bytes were (-0 is written 0).
          assert.deepEqual(out, JSON.parse(JSON.stringify({ ...obj, cache_salt: salt })));
        },
      ),
    );
  });

  test('tenantCacheSalt is one-to-one: a separator inside a name cannot forge a pair', () => {
    assert.notEqual(tenantCacheSalt('tenant:a', 'b/x'), tenantCacheSalt('tenant:a/b', 'x'));
    assert.notEqual(tenantCacheSalt('t', null), tenantCacheSalt('t', ''));
    fc.assert(
      fc.property(
        fc.tuple(fc.string(), fc.option(fc.string())),
        fc.tuple(fc.string(), fc.option(fc.string())),
        ([t1, s1], [t2, s2]) => {
          const same = t1 === t2 && s1 === s2;
          assert.equal(tenantCacheSalt(t1, s1) === tenantCacheSalt(t2, s2), same);
        },
      ),
    );
  });
});

describe('tenant salts through the gateway', () => {
  let engines: EngineServerHandle[] = [];
  let gw: GatewayHandle;
  before(async () => {
    engines = await startEngines(1, { speedup: 50 });
    gw = await startGatewayFor(engines, {
      apiKeys: [
        { key: 'sk-a', tenant: 'a' },
        { key: 'sk-ab', tenant: 'a/b' },
      ],
    });
  });
  after(async () => {
    await gw?.close();
    await Promise.all(engines.map((e) => e.close()));
  });

  test('a body nested 5,000 arrays deep is served with an API key (not a 500)', async () => {
    const deep = `${'['.repeat(5_000)}${']'.repeat(5_000)}`;
    const res = await fetch(`${gw.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer sk-a' },
      body: `{"model":"${MODEL}","prompt":"hello","max_tokens":2,"deep":${deep}}`,
    });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    assert.equal(
      (JSON.parse(text) as { usage: { completion_tokens: number } }).usage.completion_tokens,
      2,
    );
  });

  test("tenant a with salt b/x does not read tenant a/b's entries with salt x", async () => {
    const prompt = tokens(77, 3_000);
    const cachedOf = (r: Awaited<ReturnType<typeof complete>>) =>
      r.json?.usage?.prompt_tokens_details?.cached_tokens ?? -1;
    const first = await complete(
      gw.url,
      { model: MODEL, prompt, max_tokens: 1, cache_salt: 'x' },
      { authorization: 'Bearer sk-ab' },
    );
    assert.equal(first.status, 200, first.text);
    await waitFor(
      () => gw.router.snapshot().replicas[0]!.indexedBlocks >= 180,
      'the first prompt indexed',
    );
    // The same tenant and salt again is a hit: the cache works, so a miss below means something.
    const again = await complete(
      gw.url,
      { model: MODEL, prompt, max_tokens: 1, cache_salt: 'x' },
      { authorization: 'Bearer sk-ab' },
    );
    assert.ok(cachedOf(again) >= 2_900, `cached ${cachedOf(again)}`);
    const routerCached = gw.router.counters().cachedTokens;
    const other = await complete(
      gw.url,
      { model: MODEL, prompt, max_tokens: 1, cache_salt: 'b/x' },
      { authorization: 'Bearer sk-a' },
    );
    assert.equal(other.status, 200, other.text);
    assert.equal(cachedOf(other), 0);
    assert.equal(gw.router.counters().cachedTokens, routerCached);
  });
});
