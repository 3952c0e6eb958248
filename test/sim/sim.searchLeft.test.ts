/**
 * The search's probes still to come (`probesLeft`): the replay under every monotone outcome that
 * fits what is decided, averaged. Checked against the search itself, run to its end on a
 * threshold: from any point on its way, the probes it still took lie within the estimate's range.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { probesLeft } from '../../src/sim/searchLeft.ts';
import { planSearch } from '../../src/sim/searchPlan.ts';

/** The counts the search probes, in order, when the SLO is met from `t` replicas up. */
function probeOrder(start: number, max: number, t: number): number[] {
  const order: number[] = [];
  for (;;) {
    const step = planSearch({ start, max }, (n) => (order.includes(n) ? n >= t : undefined));
    if ('answer' in step) return order;
    order.push(step.probe);
  }
}

test('nothing left once the search has its answer', () => {
  const order = probeOrder(4, 16, 3);
  const known = (n: number) => (order.includes(n) ? n >= 3 : undefined);
  assert.deepEqual(probesLeft({ start: 4, max: 16 }, known), { expected: 0, most: 0 });
});

test('before any probe: the mean of the whole search over every threshold', () => {
  const max = 16;
  let sum = 0;
  let most = 0;
  for (let t = 1; t <= max + 1; t++) {
    const n = probeOrder(4, max, t).length;
    sum += n;
    most = Math.max(most, n);
  }
  const left = probesLeft({ start: 4, max }, () => undefined);
  assert.equal(left.most, most);
  assert.ok(Math.abs(left.expected - sum / (max + 1)) < 1e-9);
});

test('on the way, the probes the search still takes lie within the estimate', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 64 }),
      fc.integer({ min: 1, max: 64 }),
      fc.integer({ min: 1, max: 65 }),
      fc.nat(),
      (start, max, t, cut) => {
        const order = probeOrder(start, max, t);
        const done = order.slice(0, cut % (order.length + 1));
        const left = probesLeft({ start, max }, (n) => (done.includes(n) ? n >= t : undefined));
        const actual = order.length - done.length;
        assert.ok(left.most >= actual, `most ${left.most} < ${actual}`);
        assert.ok(left.expected <= left.most);
        if (actual === 0) assert.equal(left.expected, 0);
        else assert.ok(left.expected >= 1);
      },
    ),
    { numRuns: 300 },
  );
});
