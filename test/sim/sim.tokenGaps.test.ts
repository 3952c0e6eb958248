/** The fleet's per-request token times, held to a Map of the requests in flight. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { TokenGaps } from '../../src/sim/tokenGaps.ts';

test('a first token has no gap; a later one, the time since the last', () => {
  const gaps = new TokenGaps();
  const a = gaps.open(true);
  const b = gaps.open(false);
  assert.notEqual(a, b);
  assert.ok(Number.isNaN(gaps.tick(a, 10)));
  assert.equal(gaps.tick(a, 25), 15);
  assert.equal(gaps.tick(a, 25), 0);
  assert.ok(Number.isNaN(gaps.tick(b, 30)));
  assert.equal(gaps.measured(a), true);
  assert.equal(gaps.measured(b), false);
});

test('a closed slot is reused, with no token yet', () => {
  const gaps = new TokenGaps();
  const a = gaps.open(true);
  gaps.tick(a, 5);
  gaps.close(a);
  const b = gaps.open(false);
  assert.equal(b, a);
  assert.ok(Number.isNaN(gaps.tick(b, 9)));
  assert.equal(gaps.measured(b), false);
});

type Op =
  | { kind: 'open'; measured: boolean }
  | { kind: 'close'; pick: number }
  | { kind: 'tick'; pick: number; dtMs: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('open' as const), measured: fc.boolean() }),
  fc.record({ kind: fc.constant('close' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('tick' as const), pick: fc.nat(), dtMs: fc.nat({ max: 1000 }) }),
);

test('open requests hold distinct slots, gaps match a record per request, slots stay few', () => {
  fc.assert(
    fc.property(fc.array(op, { maxLength: 400 }), (ops) => {
      const gaps = new TokenGaps();
      // The model: each request in flight by its slot, with its last token time.
      const live = new Map<number, { lastMs: number; measured: boolean }>();
      let nowMs = 0;
      let most = 0;
      for (const o of ops) {
        const slots = [...live.keys()];
        if (o.kind === 'open') {
          const slot = gaps.open(o.measured);
          assert.ok(!live.has(slot), `slot ${slot} is already held`);
          live.set(slot, { lastMs: Number.NaN, measured: o.measured });
          most = Math.max(most, live.size);
        } else if (slots.length === 0) {
        } else if (o.kind === 'close') {
          const slot = slots[o.pick % slots.length]!;
          gaps.close(slot);
          live.delete(slot);
        } else {
          const slot = slots[o.pick % slots.length]!;
          nowMs += o.dtMs;
          const want = live.get(slot)!;
          assert.equal(gaps.measured(slot), want.measured);
          const gapMs = gaps.tick(slot, nowMs);
          if (Number.isNaN(want.lastMs)) assert.ok(Number.isNaN(gapMs));
          else assert.equal(gapMs, nowMs - want.lastMs);
          want.lastMs = nowMs;
        }
      }
      assert.equal(gaps.peakInFlight, most, 'no more slots than requests in flight at once');
    }),
    { numRuns: 200 },
  );
});
