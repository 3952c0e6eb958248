/**
 * `--drain-stages S` (src/sim/stageGate.ts): a rate ladder's stages run as inference-perf runs
 * them, each starting S seconds after every request before it has ended. The gate on its own
 * (holds, shifts, windows as run), then whole runs: no stage's send before the previous stage's
 * last end + S, under a client cap and a timeout too; a stage's backlog no longer carries into
 * the next; the flag's parse and its refusals.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { UsageError } from '../../src/cli/args.ts';
import { parseSimFlags } from '../../src/cli/sim.ts';
import { resultsJson } from '../../src/results/result.ts';
import type { FleetRequestRecord } from '../../src/sim/fleet.ts';
import { type SimConfig, simulate } from '../../src/sim/run.ts';
import { StageGate } from '../../src/sim/stageGate.ts';
import type { Arrival } from '../../src/workload/arrival.ts';
import { stageWindows } from '../../src/workload/shape.ts';

function parse(args: string[]): SimConfig {
  const p = parseSimFlags(args);
  assert.ok(p !== 'help');
  return p.base;
}

const at = (atMs: number): Arrival => ({
  atMs,
  customer: 0,
  promptLength: 10,
  outputTokens: 5,
  seed: 1,
});

describe('the stage gate', () => {
  const windows = stageWindows([
    { ratePerS: 1, durationS: 10 },
    { ratePerS: 2, durationS: 10 },
    { ratePerS: 3, durationS: 10 },
    { ratePerS: 4, durationS: 10 },
  ]);

  test('the first stage passes as timed; a later one is held, then shifted to its release', () => {
    const gate = new StageGate({ windows, gapMs: 2000 });
    assert.deepEqual(gate.admit(at(3000)), at(3000));
    assert.equal(gate.holding, false);
    assert.equal(gate.admit(at(12_000)), null);
    assert.equal(gate.holding, true);
    // The stage's requests ended at 50 s: stage 1 starts at 52 s, 40 s later than timed.
    assert.deepEqual(gate.release(50_000), at(54_000));
    assert.equal(gate.holding, false);
    assert.deepEqual(gate.admit(at(19_000)), at(61_000));
    assert.equal(gate.release(70_000), null, 'nothing held, nothing released');
    assert.deepEqual(
      gate.windows().map((w) => [w.startMs, w.endMs]),
      [
        [0, 10_000],
        [52_000, 62_000],
        [62_000, 72_000],
        [72_000, 82_000],
      ],
    );
  });

  test('a stage with no arrival takes no time; its window is empty at the next start', () => {
    const gate = new StageGate({ windows, gapMs: 0 });
    assert.equal(gate.admit(at(35_000)), null);
    assert.deepEqual(gate.release(12_000), at(17_000));
    assert.deepEqual(
      gate.windows().map((w) => [w.startMs, w.endMs]),
      [
        [0, 10_000],
        [12_000, 12_000],
        [12_000, 12_000],
        [12_000, 22_000],
      ],
    );
  });

  test('a negative gap is refused', () => {
    assert.throws(() => new StageGate({ windows, gapMs: -1 }), RangeError);
  });
});

/** Per stage (by the windows as run), its first send and its last end. */
function spans(
  records: readonly FleetRequestRecord[],
  windows: readonly { startMs: number; endMs: number }[],
): { firstSendMs: number; lastEndMs: number; requests: number }[] {
  return windows.map((w) => {
    const mine = records.filter((r) => {
      const t = r.scheduledMs ?? r.arrivalMs;
      return t >= w.startMs && t < w.endMs;
    });
    return {
      firstSendMs: Math.min(...mine.map((r) => r.arrivalMs)),
      lastEndMs: Math.max(...mine.map((r) => r.endMs ?? Number.POSITIVE_INFINITY)),
      requests: mine.length,
    };
  });
}

describe('--drain-stages in a run', () => {
  // Three stages well above what 2 replicas serve: without the gate their backlog carries over.
  const LADDER = [
    ...['--workload', 'seed', '--replicas', '2', '--rate-ladder', '20x6,25x6,30x6'],
    ...['--metrics-as', 'inference-perf'],
  ];

  function run(more: string[]) {
    const records: FleetRequestRecord[] = [];
    const result = simulate({ ...parse([...LADDER, ...more]), onRequest: (r) => records.push(r) });
    return { result, records };
  }

  const drained = run(['--drain-stages', '2']);
  const plain = run([]);

  test('each stage is sent only after the one before has ended, S seconds later', () => {
    const windows = drained.result.stages!.map((s) => ({ startMs: s.startMs, endMs: s.endMs }));
    const s = spans(drained.records, windows);
    assert.equal(
      s.reduce((n, x) => n + x.requests, 0),
      drained.records.length,
    );
    for (let i = 1; i < s.length; i++) {
      assert.ok(s[i]!.requests > 0);
      assert.equal(windows[i]!.startMs, s[i - 1]!.lastEndMs + 2000);
      assert.ok(s[i]!.firstSendMs >= s[i - 1]!.lastEndMs + 2000);
      assert.equal(windows[i]!.endMs - windows[i]!.startMs, 6000, 'each stage keeps its duration');
    }
    // The first stage is as timed.
    assert.deepEqual([windows[0]!.startMs, windows[0]!.endMs], [0, 6000]);
  });

  test('the same prompts, all served; no stage waits behind another', () => {
    assert.equal(drained.result.arrived, plain.result.arrived);
    assert.equal(drained.result.completed, drained.result.arrived);
    // Back to back, the third stage's first requests queue behind the earlier stages' backlog.
    const worst = (r: typeof plain) => r.result.stages!.at(-1)!.ttftMs.p50;
    assert.ok(worst(drained) < worst(plain), `${worst(drained)} >= ${worst(plain)}`);
    // Without the flag the stages stay back to back.
    assert.deepEqual(
      plain.result.stages!.map((s) => [s.startMs, s.endMs]),
      [
        [0, 6000],
        [6000, 12_000],
        [12_000, 18_000],
      ],
    );
  });

  test('under a client cap and a timeout: every request ends, stages still apart', () => {
    const capped = run(['--drain-stages', '0', '--max-concurrency', '8', '--client-timeout', '5']);
    const windows = capped.result.stages!.map((s) => ({ startMs: s.startMs, endMs: s.endMs }));
    const s = spans(capped.records, windows);
    for (let i = 1; i < s.length; i++) assert.ok(s[i]!.firstSendMs >= s[i - 1]!.lastEndMs);
    assert.equal(capped.records.length, capped.result.arrived);
    assert.ok(capped.records.every((r) => r.endMs !== null));
    assert.ok((capped.result.errorsByKind.timeout ?? 0) > 0, 'the timeout never fired');
  });

  test('the same seed gives the same run', () => {
    assert.equal(
      resultsJson([run(['--drain-stages', '2']).result], []),
      resultsJson([drained.result], []),
    );
  });
});

test('--drain-stages parses to seconds as ms and needs a ladder', () => {
  assert.equal(parse(['--rate-ladder', '2x10', '--drain-stages', '2']).stageDrainGapMs, 2000);
  assert.equal(parse(['--rate-ladder', '2x10', '--drain-stages', '0']).stageDrainGapMs, 0);
  assert.equal(parse(['--rate-ladder', '2x10']).stageDrainGapMs, undefined);
  const refused = (args: string[], pattern: RegExp) =>
    assert.throws(
      () => parseSimFlags(args),
      (e: unknown) => e instanceof UsageError && pattern.test(e.message),
      args.join(' '),
    );
  refused(['--drain-stages', '2'], /--drain-stages runs the stages of --rate-ladder/);
  refused(['--burst', '8', '--drain-stages', '2'], /--drain-stages runs the stages/);
  for (const bad of ['-1', 'soon']) {
    refused(['--rate-ladder', '2x10', '--drain-stages', bad], /--drain-stages must be/);
  }
});
