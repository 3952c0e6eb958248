/**
 * `kvroute sim --concurrency C`: exactly C requests start at 0, every later start coincides with
 * an end (the loop's causality), never more than C are in flight, and the throughput figures
 * agree with the workload (the seed's 300 output tokens per request).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { UsageError } from '../../src/cli/args.ts';
import { parseSimFlags } from '../../src/cli/sim.ts';
import type { FleetRequestRecord } from '../../src/sim/fleet.ts';
import { simulate } from '../../src/sim/run.ts';

const C = 12;

describe('the closed loop', () => {
  const parsed = parseSimFlags([
    ...['--workload', 'seed', '--replicas', '3', '--concurrency', String(C)],
    ...['--duration', '20', '--warmup', '4'],
  ]);
  assert.ok(parsed !== 'help');
  const records: FleetRequestRecord[] = [];
  const run = simulate({ ...parsed.base, onRequest: (r) => records.push(r) });

  test('C start at 0; each later start is some request’s end; at most C in flight', () => {
    const starts = records.map((r) => r.arrivalMs).sort((a, b) => a - b);
    assert.equal(starts.filter((t) => t === 0).length, C);
    const ends = new Map<number, number>();
    for (const r of records) if (r.endMs !== null) ends.set(r.endMs, (ends.get(r.endMs) ?? 0) + 1);
    const startsAt = new Map<number, number>();
    for (const t of starts) if (t > 0) startsAt.set(t, (startsAt.get(t) ?? 0) + 1);
    for (const [t, n] of startsAt) {
      assert.ok((ends.get(t) ?? 0) >= n, `${n} start(s) at ${t} ms, ${ends.get(t) ?? 0} end(s)`);
    }
    // In flight at every start: started at or before it, not yet ended.
    for (const t of starts) {
      const inFlight = records.filter((r) => r.arrivalMs <= t && (r.endMs === null || r.endMs > t));
      assert.ok(inFlight.length <= C, `${inFlight.length} in flight at ${t} ms`);
    }
    assert.ok(starts.at(-1)! < 20_000, 'no start after --duration');
    assert.equal(run.errors, 0);
  });

  test('output tokens/s is 300 per request ended in the window; goodput at most that', () => {
    const c = run.closedLoop!;
    assert.equal(c.concurrency, C);
    assert.ok(c.requestsPerS > 0);
    assert.ok(Math.abs(c.outputTokensPerS - 300 * c.requestsPerS) < 1e-6, JSON.stringify(c));
    const ended = records.filter(
      (r) => r.arrivalMs >= 4_000 && r.endMs !== null && r.endMs >= 4_000 && r.endMs < 20_000,
    ).length;
    assert.equal(Math.round(c.requestsPerS * 16), ended);
    assert.ok(c.goodputRps <= c.requestsPerS);
  });

  test('refused beside an open-loop rate or a search', () => {
    for (const other of [['--rate', '10'], ['--search']]) {
      assert.throws(
        () => parseSimFlags(['--concurrency', '8', ...other]),
        (err: unknown) =>
          err instanceof UsageError &&
          err.message ===
            `--concurrency runs a closed loop (arrivals follow completions); drop ${other[0]}`,
      );
    }
  });
});
