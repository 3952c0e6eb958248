/**
 * Flow control's settings reload with the gateway's config (`GatewayHandle.reload`, as SIGHUP
 * or a changed file does): a priority class added to `priority-classes` is accepted in
 * `x-kvroute-priority` at once; a shorter `max-wait-ms` applies to a request already waiting
 * (it ends 503); turning flow control off is named as needing a restart. One simulated engine
 * that runs one sequence (max-num-seqs 1), held by a long stream; the `openai` client. Counts
 * and statuses only, never times.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { applyConfigDoc, type GatewayConfig } from '../../src/serving/config.ts';
import { startGateway } from '../../src/gateway/gateway.ts';
import {
  configFor,
  type EngineServerHandle,
  type GatewayHandle,
  startEngine,
  tokens,
  waitFor,
  within,
} from '../support/gateway.harness.ts';

const HANG_GUARD_MS = 120_000;
const FLOW_KEY = 'flow-control, tenant flow weights';
const CLASSES = { 'priority-classes': { urgent: -5 } };

function doc(maxWaitMs: number, extra: object = {}): object {
  return {
    'flow-control': {
      enabled: true,
      'max-wait-ms': maxWaitMs,
      saturation: { 'queue-depth': 0, 'queued-prefill-ms': 0 },
    },
    ...extra,
  };
}

async function queued(gw: GatewayHandle): Promise<number> {
  const text = await (await fetch(`${gw.url}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith('kvroute_flow_queued{')) sum += Number(line.slice(line.lastIndexOf(' ')));
  }
  return sum;
}

async function status(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 200;
  } catch (err) {
    if (err instanceof OpenAI.APIError && err.status !== undefined) return err.status;
    throw err;
  }
}

describe('kvroute serve --flow-control, config reload', () => {
  let engine: EngineServerHandle;
  let gw: GatewayHandle;
  let client: OpenAI;
  let config: (d: object) => GatewayConfig;
  before(async () => {
    engine = await startEngine({ maxSeqs: 1 });
    config = (d) => applyConfigDoc(d, configFor([engine]));
    gw = await startGateway(config(doc(HANG_GUARD_MS)));
    client = new OpenAI({
      baseURL: `${gw.url}/v1`,
      apiKey: 'unused',
      maxRetries: 0,
      timeout: HANG_GUARD_MS,
    });
  });
  after(async () => {
    await gw?.close();
    await engine?.close();
  });

  test('a priority class added by a reload is accepted at once', async () => {
    const model = engine.servedModelName;
    const urgent = () =>
      status(
        client.completions.create(
          { model, prompt: tokens(1, 16), max_tokens: 1 },
          { headers: { 'x-kvroute-priority': 'urgent' } },
        ),
      );
    assert.equal(await urgent(), 400);
    const result = gw.reload(config(doc(HANG_GUARD_MS, { 'priority-classes': { urgent: -5 } })));
    assert.ok(
      result.applied.includes('max-queue-ms, max-ttft-ms, priority-classes, tenant limits'),
    );
    assert.deepEqual(result.needsRestart, []);
    assert.equal(await within(HANG_GUARD_MS, urgent(), 'the urgent request'), 200);
  });

  test('a shorter deadline applies to a request already waiting; turning it off needs a restart', async () => {
    const model = engine.servedModelName;
    const controller = new AbortController();
    const stream = await client.completions.create(
      { model, prompt: tokens(2, 48), max_tokens: 4000, stream: true, ignore_eos: true } as never,
      { signal: controller.signal },
    );
    const iterator = (stream as unknown as AsyncIterable<unknown>)[Symbol.asyncIterator]();
    await within(30_000, iterator.next(), 'the long stream');
    // One reaches the engine and waits there (its prefill queued); the other waits here.
    const sent = [3, 4].map((seed) =>
      status(client.completions.create({ model, prompt: tokens(seed, 16), max_tokens: 1 })),
    );
    await waitFor(async () => (await queued(gw)) === 1, 'one request queued', HANG_GUARD_MS);

    const shorter = gw.reload(config(doc(200, CLASSES)));
    assert.deepEqual(shorter.applied, [FLOW_KEY]);
    assert.deepEqual(shorter.needsRestart, []);
    const first = await within(HANG_GUARD_MS, Promise.race(sent), 'the queued request');
    assert.equal(first, 503);

    controller.abort();
    await iterator.return?.().catch(() => {});
    const statuses = await within(HANG_GUARD_MS, Promise.all(sent), 'both requests');
    assert.deepEqual(statuses.sort(), [200, 503]);

    const off = gw.reload(config(CLASSES));
    assert.ok(off.needsRestart.includes(FLOW_KEY), JSON.stringify(off));
    assert.ok(!off.applied.includes(FLOW_KEY));
  });
});
