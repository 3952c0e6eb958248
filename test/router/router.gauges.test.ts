/**
 * The guards' verdicts come from ReplicaGauges, arrays the router keeps beside each replica's
 * state: after any history of reports, downs, ups and removals, every replica's verdict must be
 * what `judge` says of the state the snapshot shows (healthy, last KV usage, last report time).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { judge, Router } from '../../src/router/index.ts';

type Op =
  | { op: 'report'; r: number; kvUsage: number }
  | { op: 'down' | 'up' | 'remove' | 'add'; r: number }
  | { op: 'tick'; ms: number };

const replica = fc.nat(39);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant('report' as const),
      r: replica,
      kvUsage: fc.oneof(fc.constantFrom(0, 0.9, 1), fc.double({ min: 0, max: 1, noNaN: true })),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constantFrom('down', 'up'), r: replica }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constantFrom('remove', 'add'), r: replica }) },
  {
    weight: 2,
    arbitrary: fc.record({ op: fc.constant('tick' as const), ms: fc.nat({ max: 400 }) }),
  },
);

test('every verdict is judge() of the replica as the snapshot shows it', () => {
  const thresholds = { kvThreshold: 0.9, staleMs: 300 };
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 40 }),
      fc.array(opArb, { maxLength: 80 }),
      (count, ops) => {
        const router = new Router({
          replicas: Array.from({ length: count }, (_, i) => `r${i}`),
          ...thresholds,
        });
        let nowMs = 1_000;
        for (const o of ops) {
          if (o.op === 'tick') {
            nowMs += o.ms;
            continue;
          }
          const name = `r${o.r}`;
          // Unknown names (never added, or removed) throw; the history goes on.
          try {
            if (o.op === 'report')
              router.onReport(name, { kvUsage: o.kvUsage, running: 1, waiting: 0 }, nowMs);
            else if (o.op === 'down') router.markDown(name);
            else if (o.op === 'up') router.markUp(name);
            else if (o.op === 'remove') router.removeReplica(name);
            else router.addReplica(name);
          } catch {}
          for (const s of router.snapshot(nowMs).replicas) {
            const expected = judge(
              {
                healthy: s.healthy,
                kvUsage: s.kvUsage ?? undefined,
                reportedAtMs: s.reportedAtMs ?? undefined,
              },
              nowMs,
              thresholds,
            );
            assert.equal(s.verdict, expected, `${s.name} after ${JSON.stringify(o)}`);
          }
        }
      },
    ),
    { numRuns: 200 },
  );
});
