/**
 * `kvroute sim`'s client flags: --rate-ladder, --burst, --max-concurrency, --client-timeout,
 * --metrics-as. Each flag's parse and bad values; the in-flight cap never exceeded (property);
 * a timeout aborts the request on its engine (its blocks freed at once) and is counted; the
 * same seed gives the same output; the closed loop's figures when no request fits its window.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { UsageError } from '../../src/cli/args.ts';
import { parseSimFlags } from '../../src/cli/sim.ts';
import { resultsJson } from '../../src/results/result.ts';
import type { FleetRequestRecord, SimEngine } from '../../src/sim/fleet.ts';
import { type SimConfig, simulate } from '../../src/sim/run.ts';

function parse(args: string[]): SimConfig {
  const p = parseSimFlags(args);
  assert.ok(p !== 'help');
  return p.base;
}

function refused(args: string[], pattern: RegExp): void {
  assert.throws(
    () => parseSimFlags(args),
    (err: unknown) => err instanceof UsageError && pattern.test(err.message),
    args.join(' '),
  );
}

describe('the client flags parse', () => {
  test('--rate-ladder: stages, their sum as the duration, no warm-up by default', () => {
    const base = parse(['--rate-ladder', '2x60,4x30,8.5x10']);
    assert.deepEqual(base.workload.shape, {
      kind: 'ladder',
      stages: [
        { ratePerS: 2, durationS: 60 },
        { ratePerS: 4, durationS: 30 },
        { ratePerS: 8.5, durationS: 10 },
      ],
    });
    assert.equal(base.durationMs, 100_000);
    assert.equal(base.warmupMs, 0);
    for (const bad of ['2x', 'x60', '0x60', '2x0', '2x-1', 'fast', '2x60,,4x60', '2*60']) {
      refused(['--rate-ladder', bad], /--rate-ladder takes stages RATExSECONDS/);
    }
    for (const other of [
      ['--rate', '3'],
      ['--duration', '30'],
      ['--concurrency', '4'],
    ]) {
      refused(['--rate-ladder', '2x60', ...other], /--rate-ladder sets the arrival times/);
    }
  });

  test('--burst: N prompts at 0, the run until they end', () => {
    const base = parse(['--burst', '64']);
    assert.deepEqual(base.workload.shape, { kind: 'burst', requests: 64 });
    assert.equal(base.durationMs, undefined);
    assert.equal(base.warmupMs, 0);
    for (const bad of ['0', '-3', '2.5', 'many']) refused(['--burst', bad], /--burst must be/);
    refused(['--burst', '8', '--rate-ladder', '1x10'], /give one/);
    refused(['--burst', '8', '--warmup', '5'], /--burst sends everything at t = 0/);
    refused(['--burst', '8', '--rate', '5'], /--burst sets the arrival times; drop --rate/);
  });

  test('--max-concurrency, --client-timeout, --metrics-as', () => {
    const base = parse(['--max-concurrency', '16', '--client-timeout', '2.5']);
    assert.equal(base.maxConcurrency, 16);
    assert.equal(base.clientTimeoutMs, 2500);
    assert.equal(parse(['--metrics-as', 'inference-perf']).metricsAs, 'inference-perf');
    for (const bad of ['0', '1.5', 'x']) {
      refused(['--max-concurrency', bad], /--max-concurrency must be/);
    }
    for (const bad of ['0', '-1', 'soon']) {
      refused(['--client-timeout', bad], /--client-timeout must be/);
    }
    refused(
      ['--metrics-as', 'guidellm'],
      /--metrics-as must be one of vllm, inference-perf, sglang/,
    );
    refused(['--max-concurrency', '4', '--concurrency', '4'], /give one/);
    refused(['--client-timeout', '4', '--pd', '1:1'], /drop --pd/);
  });

  test('absent, the run is as before (no shape, no cap, no timeout)', () => {
    const base = parse(['--workload', 'seed']);
    assert.equal(base.workload.shape, undefined);
    assert.equal(base.maxConcurrency, undefined);
    assert.equal(base.clientTimeoutMs, undefined);
    assert.equal(base.metricsAs, undefined);
  });
});

/** The most requests in flight at any send: sent at or before it, not ended by then. */
function peakInFlight(records: readonly FleetRequestRecord[]): number {
  let peak = 0;
  for (const r of records) {
    const t = r.arrivalMs;
    const n = records.filter((o) => o.arrivalMs <= t && (o.endMs === null || o.endMs > t)).length;
    peak = Math.max(peak, n);
  }
  return peak;
}

test('--max-concurrency is never exceeded, and binds when the load is above it (property)', () => {
  let bound = 0;
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 8 }),
      fc.integer({ min: 4, max: 30 }),
      fc.integer({ min: 1, max: 1000 }),
      (cap, rate, seed) => {
        const records: FleetRequestRecord[] = [];
        const base = parse([
          ...['--workload', 'seed', '--replicas', '2', '--rate', String(rate)],
          ...['--duration', '4', '--warmup', '0', '--seed', String(seed)],
          ...['--max-concurrency', String(cap)],
        ]);
        const run = simulate({ ...base, onRequest: (r) => records.push(r) });
        const peak = peakInFlight(records);
        assert.ok(peak <= cap, `${peak} in flight, cap ${cap}`);
        if (peak === cap) bound++;
        // Every arrival is sent and ends: none is left waiting.
        assert.equal(run.arrived, records.length);
        assert.equal(run.errors, 0);
      },
    ),
    { numRuns: 6, seed: 7 },
  );
  assert.ok(bound > 0, 'the cap never bound: the test would pass without it');
});

describe('--client-timeout', () => {
  const aborts: { id: string; freedBlocks: number; known: boolean }[] = [];
  const records: FleetRequestRecord[] = [];
  const base = parse([
    ...['--workload', 'seed', '--replicas', '2', '--rate', '8', '--duration', '20'],
    ...['--warmup', '0', '--client-timeout', '3'],
  ]);
  const run = simulate({
    ...base,
    onRequest: (r) => records.push(r),
    instrument: {
      engine: (e: SimEngine): SimEngine => ({
        add: (req) => e.add(req),
        step: () => e.step(),
        hasWork: () => e.hasWork(),
        counters: () => e.counters(),
        abort: (id) => {
          const before = e.counters().kvBlocksFree;
          const known = e.abort(id);
          aborts.push({ id, known, freedBlocks: e.counters().kvBlocksFree - before });
          return known;
        },
      }),
    },
  });
  const timedOut = records.filter((r) => r.error === 'timeout');

  test('timed-out requests are counted apart, each ending at its send + the timeout', () => {
    assert.ok(timedOut.length > 0, 'an overloaded fleet times requests out');
    assert.equal(run.errorsByKind.timeout, timedOut.length);
    for (const r of timedOut) assert.equal(r.endMs, r.arrivalMs + 3000);
    const done = records.filter((r) => r.error === undefined);
    assert.ok(done.every((r) => r.endMs! - r.arrivalMs <= 3000));
    assert.equal(run.completed, done.length);
  });

  test('each is aborted on its engine, which frees its blocks at once', () => {
    const known = aborts.filter((a) => a.known);
    assert.ok(known.length > 0);
    assert.ok(aborts.length <= timedOut.length);
    // A request still waiting holds no blocks; a running one frees what it held.
    assert.ok(
      known.some((a) => a.freedBlocks > 0),
      'no abort freed a block',
    );
    assert.ok(known.every((a) => a.freedBlocks >= 0));
  });

  test('the same seed gives the same run; another gives another', () => {
    const again = simulate(base);
    assert.equal(resultsJson([again], []), resultsJson([run], []));
    const other = simulate({ ...base, seed: base.seed + 1 });
    assert.notEqual(resultsJson([other], []), resultsJson([run], []));
  });
});

test('a ladder with a cap and a timeout: per-stage figures, the harness summary, deterministic', () => {
  const args = [
    ...['--workload', 'seed', '--replicas', '3', '--rate-ladder', '2x10,10x10'],
    ...['--max-concurrency', '24', '--client-timeout', '8', '--metrics-as', 'sglang'],
  ];
  const a = simulate(parse(args));
  const b = simulate(parse(args));
  assert.equal(resultsJson([a], []), resultsJson([b], []));
  assert.equal(a.stages!.length, 2);
  assert.deepEqual(
    a.stages!.map((s) => [s.ratePerS, s.startMs, s.endMs]),
    [
      [2, 0, 10_000],
      [10, 10_000, 20_000],
    ],
  );
  const sent = a.stages!.reduce((n, s) => n + s.sent, 0);
  assert.equal(sent, a.arrived);
  for (const s of a.stages!) assert.equal(s.sent, s.completed + s.timedOut + s.failed);
  assert.equal(a.harness!.harness, 'sglang');
  assert.equal(a.harness!.completed, a.completed);
  assert.ok(a.harness!.meanConcurrency! > 0 && a.harness!.meanConcurrency! <= 24);
});

test('a burst: every prompt sent at 0, all measured', () => {
  const records: FleetRequestRecord[] = [];
  const run = simulate({
    ...parse(['--workload', 'groups', '--replicas', '2', '--burst', '48']),
    onRequest: (r) => records.push(r),
  });
  assert.equal(run.arrived, 48);
  assert.ok(records.every((r) => r.arrivalMs === 0));
  assert.equal(run.completed + run.errors, 48);
  assert.equal(run.ttftMs.count, run.completed);
});

test('closed loop: requests longer than the window are reported, not 0 tokens/s', () => {
  const run = simulate(
    parse([
      ...['--workload', 'seed', '--replicas', '1', '--concurrency', '4'],
      ...['--duration', '0.5', '--warmup', '0'],
    ]),
  );
  const c = run.closedLoop!;
  assert.equal(c.over, 'measured-requests');
  assert.ok(c.outputTokensPerS > 0, JSON.stringify(c));
  assert.ok(c.requestsPerS > 0);
});
