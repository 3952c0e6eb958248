/**
 * `kvroute sim --planner`: a fleet that grows (a replica joins after its start-up and takes
 * traffic only from then), shrinks (a draining replica gets no new request, and every request
 * ends), cancels a start (the router's ids then run ahead of the fleet's numbers), the real
 * planner's run is the same for the same seed, and the flags' errors.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { UsageError } from '../../src/cli/args.ts';
import { parseSimFlags, run as runSimCli } from '../../src/cli/sim.ts';
import * as gateway from '../../src/serving/planner.ts';
import * as defaults from '../../src/planner/online/defaults.ts';
import type { RequestRecord } from '../../src/results/requestRecord.ts';
import type { FleetScaling, ScalingPoint } from '../../src/sim/fleet.ts';
import {
  replicaMsOf,
  replicasAt,
  SimPlanner,
  simulatePlannerLoop,
} from '../../src/sim/plannerLoop.ts';
import { makeSimRouter } from '../../src/sim/routerAdapter.ts';
import { type SimConfig, simulate } from '../../src/sim/run.ts';
import { makeSyntheticTrace } from '../../src/workload/trace.ts';
import { runCli } from '../support/cli.ts';
import { smallSeedConfig } from '../support/sim.ts';

/** A planner that answers from a script: the last entry at or before now (null before any). */
function scripted(
  script: [atMs: number, replicas: number][],
  intervalMs: number,
  startupMs: number,
): FleetScaling & { observed: number } {
  return {
    intervalMs,
    startupMs,
    observed: 0,
    observe() {
      this.observed++;
    },
    desired(nowMs) {
      let n: number | null = null;
      for (const [at, replicas] of script) if (at <= nowMs) n = replicas;
      return n;
    },
  };
}

/** A run with a scripted planner: its result, requests and size log. */
function runScripted(config: SimConfig, scaling: FleetScaling) {
  const requests: RequestRecord[] = [];
  let sizes: ScalingPoint[] = [];
  const run = simulate({ ...config, onRequest: (r) => requests.push(r) }, makeSimRouter, {
    scaling,
    onOutcome: (o) => {
      sizes = o.scaling ?? [];
    },
  });
  return { run, requests, sizes };
}

const light = (replicas: number) =>
  smallSeedConfig({
    workload: { kind: 'synthetic', name: 'seed', ratePerS: 3 },
    durationMs: 40_000,
    warmupMs: 0,
    replicas,
  });

describe('a fleet that changes size', () => {
  test('grows: the new replica takes requests only after its start-up', () => {
    const scaling = scripted([[5_000, 2]], 5_000, 10_000);
    const { run, requests, sizes } = runScripted(light(1), scaling);
    assert.equal(run.errors, 0);
    assert.equal(run.completed, run.arrived);
    assert.equal(scaling.observed, run.arrived, 'every arrival is observed');
    const onNew = requests.filter((r) => r.replica === 1);
    assert.ok(onNew.length > 0, 'the new replica takes traffic');
    for (const r of onNew) assert.ok(r.arrivalMs >= 15_000, `routed at ${r.arrivalMs}`);
    assert.ok(requests.some((r) => r.replica === 0 && r.arrivalMs >= 15_000));
    assert.deepEqual(sizes.slice(0, 3), [
      { atMs: 0, serving: 1, starting: 0, draining: 0 },
      { atMs: 5_000, serving: 1, starting: 1, draining: 0 },
      { atMs: 15_000, serving: 2, starting: 0, draining: 0 },
    ]);
  });

  test('shrinks: a draining replica gets no new request, and every request ends', () => {
    const scaling = scripted([[10_000, 1]], 10_000, 0);
    const { run, requests, sizes } = runScripted(light(3), scaling);
    assert.equal(run.errors, 0);
    assert.equal(run.completed, run.arrived, 'no request is lost');
    for (const r of requests) {
      assert.equal(r.error, undefined);
      if (r.replica !== 0) assert.ok(r.arrivalMs < 10_000, `r${r.replica} got ${r.arrivalMs}`);
    }
    // Both drain (the newest first), then leave; the fleet ends with one replica.
    const at = sizes.find((p) => p.atMs === 10_000)!;
    assert.equal(at.serving, 1);
    assert.equal(at.serving + at.draining, 3 - (2 - at.draining));
    assert.deepEqual(sizes[sizes.length - 1]!, {
      ...sizes[sizes.length - 1]!,
      serving: 1,
      starting: 0,
      draining: 0,
    });
    assert.ok(requests.some((r) => r.replica === 2 && r.endMs !== null && r.endMs > 10_000));
  });

  test('a start cancelled before it is ready: the next replica is numbered past it', () => {
    // 1 -> 2 at 5 s (r1 starting), back to 1 at 10 s (r1 cancelled), 2 at 15 s (r2, ready at
    // 25 s, the router's second replica: its id 1 names the fleet's replica 2).
    const scaling = scripted(
      [
        [5_000, 2],
        [10_000, 1],
        [15_000, 2],
      ],
      5_000,
      10_000,
    );
    const { run, requests } = runScripted(light(1), scaling);
    assert.equal(run.errors, 0);
    assert.equal(run.completed, run.arrived);
    assert.ok(!requests.some((r) => r.replica === 1), 'the cancelled replica never served');
    const onNew = requests.filter((r) => r.replica === 2);
    assert.ok(onNew.length > 0);
    for (const r of onNew) assert.ok(r.arrivalMs >= 25_000);
  });

  test('replica-ms of a size log', () => {
    const sizes: ScalingPoint[] = [
      { atMs: 0, serving: 2, starting: 0, draining: 0 },
      { atMs: 1_000, serving: 2, starting: 1, draining: 0 },
      { atMs: 3_000, serving: 2, starting: 0, draining: 1 },
    ];
    assert.equal(replicaMsOf(sizes, 4_000), 2 * 1_000 + 3 * 2_000 + 3 * 1_000);
    assert.equal(replicaMsOf(sizes, 500), 1_000);
    assert.equal(replicasAt(sizes, 2_000), 3);
  });
});

describe('the planner in the loop', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-planner-loop-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const trace = join(dir, 'trace.jsonl');
  writeFileSync(
    trace,
    makeSyntheticTrace({
      seed: 3,
      requests: 240,
      ratePerS: 4,
      roots: 4,
      sharedBlocks: 4,
      maxUniqueBlocks: 6,
      outputTokens: 64,
    }),
  );
  const options = {
    windowMs: 20_000,
    intervalMs: 15_000,
    scaleDownMs: 20_000,
    startupMs: 10_000,
    maxReplicas: 8,
  };
  const config = () => {
    const parsed = parseSimFlags(['--trace', trace, '--replicas', '1', '--warmup', '0']);
    assert.notEqual(parsed, 'help');
    return (parsed as Exclude<typeof parsed, 'help'>).base;
  };

  test('same seed, same run: its sizes, rounds and figures', () => {
    const a = simulatePlannerLoop(config(), options);
    const b = simulatePlannerLoop(config(), options);
    assert.ok(a.planner.rounds.length > 0);
    assert.equal(a.planner.firstAnswerS, 15);
    assert.deepEqual(a.planner, b.planner);
    assert.deepEqual(
      { ...a.run, ttftCdf: null, load: null },
      { ...b.run, ttftCdf: null, load: null },
    );
    // Every request ends, whatever the planner did.
    assert.equal(a.run.completed + a.run.errors, a.run.arrived);
    assert.equal(a.run.errors, 0);
    // The count follows the answers: after the first round's start-up it runs what was asked.
    const first = a.planner.rounds[0]!;
    assert.equal(
      replicasAt(a.planner.sizes, first.atMs),
      first.desired,
      'asked-for replicas count from the moment they are asked for',
    );
  });

  test('kvroute sim --planner prints the count, replica-hours, first answer and SLO', async () => {
    const argv = ['--trace', trace, '--replicas', '1', '--warmup', '0', '--planner'];
    argv.push('--planner-window-s', '20', '--planner-interval-s', '15');
    argv.push('--planner-scale-down-s', '20', '--planner-startup-s', '10');
    argv.push('--planner-max-replicas', '8', '--planner-fast-window-s', '5');
    const text = await captureStdout(() => runSimCli(argv));
    assert.equal(text.code, 0);
    assert.match(text.out, /first answer: 15 s into the traffic/);
    assert.match(text.out, /replica-hours: \d+\.\d{3} over the \d+ s of arrivals/);
    assert.match(text.out, /SLO: (met|missed): TTFT p99 [\d,]+ ms \(target 570\); TPOT p99/);
    assert.match(text.out, /time s +answer +fast +desired +serving +starting +draining/);
    const json = await captureStdout(() => runSimCli([...argv, '--json']));
    const doc = JSON.parse(json.out) as { results: unknown[]; planner: { rounds: unknown[] }[] };
    assert.equal(doc.results.length, 1);
    assert.ok(doc.planner[0]!.rounds.length > 0);
  });
});

async function captureStdout(fn: () => Promise<number>): Promise<{ code: number; out: string }> {
  const chunks: string[] = [];
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string | Uint8Array) => {
    chunks.push(String(chunk));
    return true;
  }) as typeof process.stdout.write;
  try {
    const code = await fn();
    return { code, out: chunks.join('') };
  } finally {
    process.stdout.write = write;
  }
}

describe('the sim planner', () => {
  const arrival = (atMs: number) => ({ atMs, customer: 0, promptLength: 600, outputTokens: 10 });
  const make = (fastWindowMs?: number) =>
    new SimPlanner(
      {
        windowMs: 60_000,
        intervalMs: 10_000,
        scaleDownMs: 20_000,
        startupMs: 0,
        maxReplicas: 8,
        ...(fastWindowMs !== undefined && { fastWindowMs }),
      },
      {
        // Many requests (the long window) need 2 replicas; a few (a short one) 4.
        search: (obs) => ({ minReplicas: obs.length > 5 ? 2 : 4, probes: 1 }),
        blockSize: 16,
        initialReplicas: 3,
      },
    );
  const feed = (p: SimPlanner) => {
    for (let t = 0; t < 30_000; t += 1_000) p.observe(arrival(t) as never, []);
  };

  test('the running count holds as an answer at 0: a lower one takes scale-down to apply', () => {
    const p = make();
    feed(p);
    assert.equal(
      p.desired(10_000),
      3,
      'answer 2 at 10 s, but 3 runs since 0 and 20 s have not passed',
    );
    assert.equal(p.desired(20_000), 2);
    assert.equal(p.rounds[0]!.answer, 2);
  });

  test('a fast window answers the larger count of the two searches', () => {
    const p = make(4_000);
    feed(p);
    assert.equal(p.desired(29_000), 4);
    assert.equal(p.rounds[0]!.answer, 2);
    assert.equal(p.rounds[0]!.fastAnswer, 4);
    assert.equal(p.rounds[0]!.probes, 2);
  });
});

describe('kvroute sim --planner flags', () => {
  const parse =
    (...argv: string[]) =>
    () =>
      parseSimFlags(['--workload', 'seed', ...argv]);

  test('defaults are serve --planner’s, and the start-up delay', () => {
    const p = parseSimFlags(['--workload', 'seed', '--planner']);
    assert.notEqual(p, 'help');
    assert.deepEqual((p as Exclude<typeof p, 'help'>).planner, {
      startupMs: 60_000,
      windowMs: gateway.DEFAULT_PLANNER_WINDOW_S * 1000,
      intervalMs: gateway.DEFAULT_PLANNER_INTERVAL_S * 1000,
      scaleDownMs: gateway.DEFAULT_PLANNER_SCALE_DOWN_S * 1000,
      maxReplicas: gateway.DEFAULT_PLANNER_MAX_REPLICAS,
    });
    assert.equal(defaults.DEFAULT_PLANNER_WINDOW_S, gateway.DEFAULT_PLANNER_WINDOW_S);
    const q = parseSimFlags(['--workload', 'seed']);
    assert.equal((q as Exclude<typeof q, 'help'>).planner, null);
  });

  test('bad values and companions name the flag', () => {
    assert.throws(parse('--planner', '--planner-startup-s', '-1'), (err: Error) => {
      assert.ok(err instanceof UsageError);
      assert.match(err.message, /--planner-startup-s must be at least 0/);
      return true;
    });
    assert.throws(parse('--planner', '--planner-interval-s', '0'), /--planner-interval-s/);
    assert.throws(parse('--planner', '--planner-window-s', 'soon'), /--planner-window-s must be/);
    assert.throws(parse('--planner', '--planner-max-replicas', '2.5'), /an integer/);
    assert.throws(parse('--planner-startup-s', '30'), /--planner-startup-s needs --planner/);
    assert.throws(
      parse('--planner', '--planner-window-s', '60', '--planner-fast-window-s', '60'),
      /--planner-fast-window-s must be shorter than --planner-window-s \(60\)/,
    );
    for (const other of [
      ['--search'],
      ['--kill', '0@5'],
      ['--routers', '2'],
      ['--fleet', 'h200:2'],
    ]) {
      assert.throws(parse('--planner', ...other), new RegExp(`drop ${other[0]}`));
    }
  });

  test('the CLI answers a bad flag with one line and exit 2, no stack', () => {
    const r = runCli(['sim', '--workload', 'seed', '--planner', '--planner-startup-s', 'x']);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /--planner-startup-s must be a number, got 'x'/);
    assert.doesNotMatch(r.stderr, /at .*\.ts:\d+/);
  });
});
