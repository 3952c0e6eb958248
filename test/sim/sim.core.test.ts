import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { EventQueue, PRIORITY, type SimEvent } from '../../src/sim/eventQueue.ts';
import { runLoop } from '../../src/sim/loop.ts';
import { LogHistogram, percentile, summarize } from '../../src/results/stats.ts';
import { BusyTracker, LoadSampler } from '../../src/sim/metrics.ts';
import { searchMinReplicas } from '../../src/sim/search.ts';
import type { SimulatedRun } from '../../src/results/result.ts';

type Ev = SimEvent & { name: string };
const ev = (name: string, timeMs: number, priority: number): Ev => ({
  name,
  timeMs,
  priority,
  seq: 0,
});

test('same-time events pop by priority, then in insertion order', () => {
  const q = new EventQueue<Ev>();
  q.push(ev('arrival-1', 10, PRIORITY.arrival));
  q.push(ev('sample', 10, PRIORITY.sample));
  q.push(ev('step-end', 10, PRIORITY.stepEnd));
  q.push(ev('arrival-2', 10, PRIORITY.arrival));
  q.push(ev('kill', 10, PRIORITY.fault));
  q.push(ev('early', 5, PRIORITY.sample));
  q.push(ev('report', 10, PRIORITY.report));
  const order: string[] = [];
  for (let e = q.pop(); e; e = q.pop()) order.push(e.name);
  assert.deepEqual(order, [
    'early',
    'kill',
    'step-end',
    'report',
    'arrival-1',
    'arrival-2',
    'sample',
  ]);
});

test('the heap pops in (time, priority, seq) order for any input', () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.integer({ min: 0, max: 20 }), fc.integer({ min: 0, max: 3 }))),
      (items) => {
        const q = new EventQueue<Ev>();
        items.forEach(([t, p], i) => {
          q.push(ev(String(i), t, p));
        });
        const popped: Ev[] = [];
        for (let e = q.pop(); e; e = q.pop()) popped.push(e);
        const expected = items
          .map(([t, p], i) => ({ t, p, i }))
          .sort((a, b) => a.t - b.t || a.p - b.p || a.i - b.i)
          .map((x) => String(x.i));
        assert.deepEqual(
          popped.map((e) => e.name),
          expected,
        );
      },
    ),
  );
});

test('the loop sets the clock to each event and pushes what the handler returns', () => {
  const q = new EventQueue<Ev>();
  q.push(ev('a', 1, 0));
  const clock = { nowMs: 0 };
  const seen: [string, number][] = [];
  runLoop(q, clock, (e) => {
    seen.push([e.name, clock.nowMs]);
    if (e.name === 'a') return [ev('c', 3, 0), ev('b', 2, 0)];
    if (e.name === 'b') return ev('d', 2, 1);
    return undefined;
  });
  assert.deepEqual(seen, [
    ['a', 1],
    ['b', 2],
    ['d', 2],
    ['c', 3],
  ]);
});

test('percentiles are nearest-rank', () => {
  const sorted = Float64Array.from({ length: 100 }, (_, i) => i + 1);
  assert.equal(percentile(sorted, 0.5), 50);
  assert.equal(percentile(sorted, 0.99), 99);
  assert.equal(percentile(sorted, 1), 100);
  assert.ok(Number.isNaN(percentile(new Float64Array(0), 0.5)));
  const s = summarize([3, 1, 2]);
  assert.deepEqual([s.p50, s.p99, s.mean, s.count], [2, 3, 2, 3]);
});

test('the log histogram is within 1 % of the exact quantile', () => {
  const h = new LogHistogram();
  const values: number[] = [];
  for (let i = 1; i <= 10_000; i++) {
    const v = (i * 7919) % 1000 || 0.5;
    values.push(v);
    h.add(v);
  }
  const exact = summarize(values);
  for (const p of [0.5, 0.9, 0.99] as const) {
    const key = `p${Math.round(p * 100)}` as 'p50' | 'p90' | 'p99';
    assert.ok(Math.abs(h.quantile(p) / exact[key] - 1) < 0.01, `${key}`);
  }
});

test('utilization is busy time over wall time; load is averaged per bucket, NaN while down', () => {
  const b = new BusyTracker(2);
  b.add(0, 1000);
  b.add(1, 2000);
  assert.deepEqual(b.utilization(2000), [0.5, 1]);
  const load = new LoadSampler(2, 10_000, 1000);
  load.add(0, 0, 100, 0.5);
  load.add(0, 500, 300, 0.7);
  load.add(0, 1500, 50, 0.2);
  load.add(1, 0, 10, 0.1);
  const series = load.series(2000);
  assert.deepEqual(series.queuedPromptTokens, [
    [200, 50],
    [10, Number.NaN],
  ]);
  assert.ok(Math.abs(series.kvUsage[0]![0]! - 0.6) < 1e-12);
  assert.equal(load.bucketMs, 1000);
});

test('the search finds the fewest replicas that meet the SLO with few probes', () => {
  for (const need of [1, 3, 17, 22, 45, 100]) {
    const probed: number[] = [];
    const result = searchMinReplicas('x', {
      start: 22,
      max: 256,
      probe: (replicas) => {
        probed.push(replicas);
        return {
          replicas,
          sloMet: replicas >= need,
          ttftMs: { p99: 0 },
          tpotMs: { p99: 0 },
        } as unknown as SimulatedRun;
      },
    });
    assert.equal(result.minReplicas, need, `need ${need}`);
    assert.ok(probed.length <= 12, `${probed.length} probes for ${need}`);
    assert.equal(new Set(probed).size, probed.length, 'no count probed twice');
  }
  const never = searchMinReplicas('x', {
    start: 4,
    max: 16,
    probe: (replicas) =>
      ({
        replicas,
        sloMet: false,
        ttftMs: { p99: 0 },
        tpotMs: { p99: 0 },
      }) as unknown as SimulatedRun,
  });
  assert.equal(never.minReplicas, null);
});
