/**
 * The online planner live: a gateway with --planner in front of two simulated engines, the openai
 * client sending traffic, one planner round asked for directly (no waiting on its interval), and
 * its answer read three ways: /planner/desired (as KEDA's metrics-api scaler reads it), the gauge,
 * and the log line.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { defaultPlannerConfig } from '../../src/serving/planner.ts';
import {
  type EngineServerHandle,
  type GatewayHandle,
  startEngines,
  startGatewayFor,
  tokens,
} from '../support/gateway.harness.ts';

const MODEL = 'llama-3.3-70b';
const REQUESTS = 16;

describe('serve --planner', () => {
  let engines: EngineServerHandle[] = [];
  let gw: GatewayHandle;
  before(async () => {
    engines = await startEngines(2, { speedup: 100 });
    // An interval far past the test: the rounds run when the test asks.
    gw = await startGatewayFor(engines, {
      planner: { ...defaultPlannerConfig(), intervalS: 3_600, maxReplicas: 8 },
    });
  });
  after(async () => {
    await gw?.close();
    await Promise.all(engines.map((e) => e.close()));
  });

  test('no answer before traffic: desiredReplicas 0, no pool', async () => {
    const res = await fetch(`${gw.url}/planner/desired`);
    assert.equal(res.status, 200);
    const body = (await res.json()) as { desiredReplicas: number; pools: unknown[] };
    assert.equal(body.desiredReplicas, 0);
    assert.deepEqual(body.pools, []);
  });

  test('after traffic a round answers a count, exported as JSON and as the gauge', async () => {
    const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const system = tokens(7, 1_024);
    for (let i = 0; i < REQUESTS; i++) {
      await client.completions.create({
        model: MODEL,
        prompt: [...system, ...tokens(100 + i, 200)],
        max_tokens: 4,
      });
    }
    // While the round's probes run on worker threads, the gateway keeps answering.
    const round = gw.planner!.tick(Date.now());
    const during = await client.completions.create({
      model: MODEL,
      prompt: tokens(3, 50),
      max_tokens: 2,
    });
    assert.ok(during.choices[0]);
    await round;

    const res = await fetch(`${gw.url}/planner/desired`);
    const body = (await res.json()) as {
      pool: string;
      desiredReplicas: number;
      answerReplicas: number;
      sloMet: boolean;
      fit: {
        requests: number;
        ratePerS: number;
        sharedChunkFraction: number;
        outputTokens: { p50: number };
      };
      pools: { pool: string; desiredReplicas: number }[];
    };
    assert.equal(body.pool, MODEL);
    assert.ok(body.desiredReplicas >= 1 && body.desiredReplicas <= 8, `${body.desiredReplicas}`);
    assert.equal(body.sloMet, true, 'a light load meets the SLO on a few replicas');
    assert.ok(body.fit.requests >= REQUESTS);
    assert.ok(body.fit.ratePerS > 0);
    assert.ok(body.fit.sharedChunkFraction > 0, 'the shared system prompt shows');
    assert.equal(body.fit.outputTokens.p50, 4, 'usage read from the responses');
    assert.deepEqual(body.pools, [{ pool: MODEL, desiredReplicas: body.desiredReplicas }]);

    const byName = await fetch(`${gw.url}/planner/desired?pool=${encodeURIComponent(MODEL)}`);
    assert.equal(
      ((await byName.json()) as { desiredReplicas: number }).desiredReplicas,
      body.desiredReplicas,
    );
    assert.equal((await fetch(`${gw.url}/planner/desired?pool=nope`)).status, 404);

    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    assert.match(
      metrics,
      new RegExp(
        `kvroute_planner_desired_replicas\\{pool="${MODEL.replace(/\./g, '\\.')}"\\} ${body.desiredReplicas}`,
      ),
    );
  });
});
