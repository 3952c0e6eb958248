/**
 * `kvroute epp --planner` live: the picker over two embedded simulated engines, a data plane
 * playing Envoy in front of it (test/support/eppProxy.ts) and the `openai` client sending
 * traffic through it; one planner round asked for directly (no waiting on its interval), and
 * its answer read on the picker's metrics port three ways: /planner/desired (as KEDA's
 * metrics-api scaler reads it), the gauge, and the log line. Output lengths come from the
 * responses' usage (JSON answers, streams that asked for it); a stream without usage counts its
 * max_tokens.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';
import { readFlags } from '../../src/cli/args.ts';
import { EPP_OPTIONS } from '../../src/cli/options/epp.ts';
import { specOf } from '../../src/cli/options/spec.ts';
import { readServeConfig } from '../../src/cli/serve.ts';
import { type EppFleetHandle, startEppWithFleet } from '../../src/embedded/epp.ts';
import { defaultConfig } from '../../src/serving/config.ts';
import { makeLogger } from '../../src/serving/log.ts';
import { defaultPlannerConfig } from '../../src/serving/planner.ts';
import { type EppProxy, startEppProxy } from '../support/eppProxy.ts';
import { tokens } from '../support/gateway.harness.ts';

const MODEL = 'llama-3.3-70b';
const REQUESTS = 12;

interface Desired {
  pool: string;
  desiredReplicas: number;
  answerReplicas: number;
  sloMet: boolean;
  fit: {
    requests: number;
    ratePerS: number;
    sharedChunkFraction: number;
    outputTokens: { p50: number; p99: number };
  };
  pools: { pool: string; desiredReplicas: number }[];
}

describe('kvroute epp --planner', () => {
  let epp: EppFleetHandle;
  let proxy: EppProxy;
  let metricsUrl: string;
  const lines: { msg: string; move?: string; desiredReplicas?: number; pool?: string }[] = [];
  before(async () => {
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const l of chunk.toString().split('\n')) if (l) lines.push(JSON.parse(l));
        done();
      },
    });
    epp = await startEppWithFleet(
      {
        ...defaultConfig(),
        embeddedReplicas: 2,
        // An interval far past the test: the rounds run when the test asks.
        planner: { ...defaultPlannerConfig(), intervalS: 3_600, maxReplicas: 8 },
      },
      {
        port: 0,
        healthPort: 0,
        metricsPort: 0,
        embeddedSpeedup: 100,
        logger: makeLogger({ level: 'info', destination: sink, pretty: false }),
      },
    );
    proxy = await startEppProxy(epp.address);
    metricsUrl = `http://127.0.0.1:${epp.metricsPort}`;
  });
  after(async () => {
    await proxy?.close();
    await epp?.close();
  });

  test('no answer before traffic: desiredReplicas 0, no pool', async () => {
    const res = await fetch(`${metricsUrl}/planner/desired`);
    assert.equal(res.status, 200);
    const body = (await res.json()) as Desired;
    assert.equal(body.desiredReplicas, 0);
    assert.deepEqual(body.pools, []);
  });

  test('traffic through the picker: a round answers a count, as JSON, as the gauge and in the log', async () => {
    const client = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: 'unused', maxRetries: 0 });
    const system = tokens(7, 1_024);
    for (let i = 0; i < REQUESTS; i++) {
      const prompt = [...system, ...tokens(100 + i, 200)];
      if (i % 3 === 0) {
        // A stream that asked for usage: its completion_tokens count.
        const stream = await client.completions.create({
          model: MODEL,
          prompt,
          max_tokens: 4,
          stream: true,
          stream_options: { include_usage: true },
        });
        for await (const _ of stream) {
          // drained
        }
      } else {
        const answer = await client.completions.create({ model: MODEL, prompt, max_tokens: 4 });
        assert.equal(answer.usage?.completion_tokens, 4);
      }
    }
    // A stream without usage: the picker counts its max_tokens (it does not ask for usage).
    const bare = await client.completions.create({
      model: MODEL,
      prompt: tokens(5, 300),
      max_tokens: 9,
      stream: true,
    });
    for await (const _ of bare) {
      // drained
    }
    // A refused request is not traffic served: a model the pool does not serve is a 404.
    await assert.rejects(
      client.completions.create({ model: 'no-such-model', prompt: 'x', max_tokens: 2 }),
      (err: unknown) => err instanceof OpenAI.APIError && err.status === 404,
    );

    await epp.planner!.tick(Date.now());
    const body = (await (await fetch(`${metricsUrl}/planner/desired`)).json()) as Desired;
    assert.equal(body.pool, MODEL);
    assert.ok(body.desiredReplicas >= 1 && body.desiredReplicas <= 8, `${body.desiredReplicas}`);
    assert.equal(body.sloMet, true, 'a light load meets the SLO on a few replicas');
    assert.equal(body.fit.requests, REQUESTS + 1, 'every request served, the refused one not');
    assert.ok(body.fit.ratePerS > 0);
    assert.ok(body.fit.sharedChunkFraction > 0, 'the shared system prompt shows');
    assert.equal(body.fit.outputTokens.p50, 4, 'usage read from the responses');
    assert.equal(body.fit.outputTokens.p99, 9, 'the bare stream counted at its max_tokens');
    assert.deepEqual(body.pools, [{ pool: MODEL, desiredReplicas: body.desiredReplicas }]);
    assert.equal((await fetch(`${metricsUrl}/planner/desired?pool=nope`)).status, 404);

    const metrics = await (await fetch(`${metricsUrl}/metrics`)).text();
    assert.match(
      metrics,
      new RegExp(
        `kvroute_planner_desired_replicas\\{pool="${MODEL.replace(/\./g, '\\.')}"\\} ${body.desiredReplicas}`,
      ),
    );
    const changes = lines.filter((l) => l.msg === 'planner: desired replicas changed');
    assert.deepEqual(
      changes.map((l) => [l.pool, l.move, l.desiredReplicas]),
      [[MODEL, 'first', body.desiredReplicas]],
    );
  });
});

test("kvroute epp's planner flags: serve's, read by serve's reader; off by default", () => {
  const of = (argv: string[]) => {
    const flags = readFlags(argv, specOf(EPP_OPTIONS));
    if (flags === 'help') throw new Error('help');
    return readServeConfig(flags).planner;
  };
  assert.equal(of([]), null);
  assert.equal(of(['--planner'])?.windowS, defaultPlannerConfig().windowS);
  const on = of(['--planner-window-s', '60', '--planner-fast-window-s', '15'])!;
  assert.equal(on.windowS, 60);
  assert.equal(on.fastWindowS, 15);
  assert.equal(on.intervalS, defaultPlannerConfig().intervalS);
  assert.throws(() => of(['--planner-max-replicas', '0']), /--planner-max-replicas/);
});
