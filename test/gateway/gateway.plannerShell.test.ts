/**
 * The planner's shell with its search replaced by scripted answers: the gauge follows the
 * hysteresis, the log line comes once per change and never on a hold, a failed search keeps the
 * count, and a window with fewer than two requests is not searched. (The real search runs in
 * gateway.planner.test.ts.)
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { Registry } from 'prom-client';
import {
  defaultPlannerConfig,
  GatewayPlanner,
  sharePlannerOver,
} from '../../src/serving/planner.ts';
import { makeLogger } from '../../src/serving/log.ts';

test('the gauge and the log follow the hysteresis of the scripted answers', async () => {
  const lines: { msg: string; move?: string; desiredReplicas?: number }[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n')) if (l) lines.push(JSON.parse(l));
      done();
    },
  });
  const registry = new Registry();
  const script: (number | null | 'fail')[] = [3, 3, 5, 4, 4, 4, 'fail', 2];
  const seen: number[] = [];
  const planner = new GatewayPlanner(
    { ...defaultPlannerConfig(), windowS: 1_000, scaleDownS: 60, maxReplicas: 10 },
    {
      registry,
      logger: makeLogger({ level: 'info', destination: sink, pretty: false }),
      policy: 'cost',
      blockSize: 16,
      async search(obs, options) {
        seen.push(obs.length);
        assert.equal(options.threads >= 2, true, 'off the event loop');
        const next = script.shift();
        if (next === 'fail') throw new Error('worker died');
        return { minReplicas: next ?? null, probes: 1 };
      },
    },
  );
  const gauge = async () =>
    (await registry.getSingleMetric('kvroute_planner_desired_replicas')!.get()).values[0]?.value;

  planner.observe('m', { atMs: 0, promptTokens: 100, outputTokens: 5, blockKeys: [] });
  await planner.tick(1_000);
  assert.equal(seen.length, 0, 'one request: not searched');
  const counts: (number | undefined)[] = [];
  for (let i = 1; i <= 8; i++) {
    planner.observe('m', { atMs: i * 30_000, promptTokens: 100, outputTokens: 5, blockKeys: [] });
    await planner.tick(i * 30_000);
    counts.push(await gauge());
  }
  // 3 first, 3 hold, 5 up at 90 s; down to 4 once the 5 is 60 s old (150 s); the failed search
  // at 210 s keeps 4; the 2 at 240 s comes once the last 4 (180 s) is 60 s old.
  assert.deepEqual(counts, [3, 3, 5, 5, 4, 4, 4, 2]);
  const changes = lines.filter((l) => l.msg === 'planner: desired replicas changed');
  assert.deepEqual(
    changes.map((l) => [l.move, l.desiredReplicas]),
    [
      ['first', 3],
      ['up', 5],
      ['down', 4],
      ['down', 2],
    ],
  );
  assert.equal(lines.filter((l) => l.msg.includes('search failed')).length, 1);
  assert.equal(planner.answers()[0]!.answerReplicas, 2);
  await planner.close();
});

test('the planner flags: off by default, any of them turns it on, one TTFT target', async () => {
  const { readFlags } = await import('../../src/cli/args.ts');
  const { readServeConfig } = await import('../../src/cli/serve.ts');
  const { plannerSimArgs } = await import('../../src/serving/planner.ts');
  const spec = Object.fromEntries(
    [
      'planner-window-s',
      'planner-interval-s',
      'planner-scale-down-s',
      'planner-slo-ttft-p99-ms',
      'planner-slo-ttft-slowdown',
      'planner-max-replicas',
    ].map((f) => [f, { type: 'string' as const }]),
  );
  const of = (argv: string[]) => {
    const flags = readFlags(argv, { ...spec, planner: { type: 'boolean' as const } });
    if (flags === 'help') throw new Error('help');
    return readServeConfig(flags);
  };
  assert.equal(of([]).planner, null);
  const on = of(['--planner-window-s', '60', '--planner-slo-ttft-slowdown', '3']).planner!;
  assert.equal(on.windowS, 60);
  assert.equal(on.intervalS, 30);
  assert.deepEqual(plannerSimArgs(on), ['--slo-ttft-slowdown', '3']);
  assert.throws(
    () => of(['--planner-slo-ttft-p99-ms', '500', '--planner-slo-ttft-slowdown', '3']),
    /alternative/,
  );
  assert.throws(() => of(['--planner-max-replicas', '0']), /--planner-max-replicas/);
});

test('the fast window: the last seconds are searched alone too, and the larger answer is taken', async () => {
  const searched: number[] = [];
  const planner = new GatewayPlanner(
    { ...defaultPlannerConfig(), windowS: 300, fastWindowS: 30, maxReplicas: 10 },
    {
      registry: new Registry(),
      logger: makeLogger({ level: 'silent', pretty: false }),
      policy: 'cost',
      blockSize: 16,
      async search(obs) {
        searched.push(obs.length);
        // The whole window asks for 2; the burst in its last 30 s alone asks for 6.
        return { minReplicas: obs.length > 4 ? 2 : 6, probes: 1 };
      },
    },
  );
  for (const atMs of [0, 100_000, 200_000, 275_000, 280_000, 290_000]) {
    planner.observe('m', { atMs, promptTokens: 100, outputTokens: 5, blockKeys: [] });
  }
  await planner.tick(300_000);
  assert.deepEqual(searched, [6, 3], 'the window, then its last 30 s');
  assert.equal(planner.answers()[0]!.desiredReplicas, 6);
  // Off (the default): one search, its answer.
  const off = new GatewayPlanner(
    { ...defaultPlannerConfig(), windowS: 300, maxReplicas: 10 },
    {
      registry: new Registry(),
      logger: makeLogger({ level: 'silent', pretty: false }),
      policy: 'cost',
      blockSize: 16,
      async search() {
        return { minReplicas: 2, probes: 1 };
      },
    },
  );
  off.observe('m', { atMs: 0, promptTokens: 100, outputTokens: 5, blockKeys: [] });
  off.observe('m', { atMs: 290_000, promptTokens: 100, outputTokens: 5, blockKeys: [] });
  await off.tick(300_000);
  assert.equal(off.answers()[0]!.desiredReplicas, 2);
  await planner.close();
  await off.close();
});

test('shared planners: each searches both instances’ requests and exports the highest live count', async () => {
  const registries = [new Registry(), new Registry()];
  const searched: number[][] = [[], []];
  const make = (i: number) =>
    new GatewayPlanner(
      { ...defaultPlannerConfig(), windowS: 300, intervalS: 30, maxReplicas: 10 },
      {
        registry: registries[i]!,
        logger: makeLogger({ level: 'silent', pretty: false }),
        policy: 'cost',
        blockSize: 16,
        async search(obs) {
          searched[i]!.push(obs.length);
          // One replica per ten requests in the window.
          return { minReplicas: Math.ceil(obs.length / 10), probes: 1 };
        },
      },
    );
  const a = make(0);
  const b = make(1);
  // The sync channel, delivered at once, each message on the receiver's clock `nowMs`.
  let nowMs = 0;
  const sent: { from: string; observations: number; desired: number | null }[] = [];
  const link = (from: GatewayPlanner, to: GatewayPlanner, name: string) =>
    sharePlannerOver(from, {
      sharePlanner(pool, observations, desired) {
        sent.push({ from: name, observations: observations.length, desired });
        to.peerMessage(name, { pool, observations, desired }, nowMs);
      },
      attachPlanner() {},
    });
  link(a, b, 'a');
  link(b, a, 'b');
  for (let i = 0; i < 10; i++) {
    a.observe('m', { atMs: i * 1_000, promptTokens: 600, outputTokens: 5, blockKeys: [] });
    b.observe('m', { atMs: i * 1_000 + 500, promptTokens: 600, outputTokens: 5, blockKeys: [] });
  }
  nowMs = 20_000;
  // A's round sees its own ten; it then shares them and its count.
  await a.tick(nowMs);
  assert.deepEqual(searched[0], [10]);
  assert.deepEqual(sent, [{ from: 'a', observations: 10, desired: 1 }]);
  // B's round sees both instances' twenty: 2; A exports the cluster's count, 2, its own still 1.
  await b.tick(nowMs);
  assert.deepEqual(searched[1], [20]);
  assert.deepEqual(sent.at(-1), { from: 'b', observations: 10, desired: 2 });
  const fromA = a.answers(nowMs)[0]!;
  assert.equal(fromA.desiredReplicas, 2);
  assert.equal(fromA.ownReplicas, 1);
  assert.deepEqual(fromA.peers, [{ peer: 'b', desiredReplicas: 2 }]);
  const gauge = async (r: Registry) =>
    (await r.getSingleMetric('kvroute_planner_desired_replicas')!.get()).values[0]?.value;
  assert.equal(await gauge(registries[0]!), 2, 'the gauge is the cluster’s count too');
  // A's next round searches the twenty as well; a peer that leaves no longer counts.
  nowMs = 50_000;
  await a.tick(nowMs);
  assert.deepEqual(searched[0], [10, 20]);
  assert.equal(a.answers(nowMs)[0]!.ownReplicas, 2);
  a.peerGone('b', nowMs);
  assert.deepEqual(a.answers(nowMs)[0]!.peers, []);
  // A peer's count goes stale after three intervals without a word from it.
  assert.deepEqual(b.answers(nowMs)[0]!.peers, [{ peer: 'a', desiredReplicas: 2 }]);
  assert.deepEqual(b.answers(nowMs + 90_001)[0]!.peers, []);
  await a.close();
  await b.close();
});
