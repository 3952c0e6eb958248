/**
 * SequenceMap, the llama.cpp runtime's record of which sequence holds which blocks: against a
 * model of the block pool (a set of claimed keys, hits = the longest claimed prefix, keys that a
 * placement lost and no sequence holds are unclaimed), every admission finds its cached prefix
 * physically somewhere, and the pool never claims a key no sequence holds.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { SequenceMap } from '../../src/engine/runtime/llamaCpp/sequences.ts';

/**
 * A prompt's block keys: `shared` blocks of its customer's prefix, then its own. Keys are chained
 * as the pool's are: an own key names its whole prefix (customer, shared length, variant), so
 * one key never stands after two different parents.
 */
function promptKeys(customer: number, variant: number, shared: number, blocks: number): number[] {
  return Array.from({ length: blocks }, (_, i) =>
    i < shared
      ? customer * 100_000 + i
      : customer * 100_000 + (shared + 1) * 1_000 + (variant + 1) * 100 + i,
  );
}

const op = fc.oneof(
  fc.record({
    kind: fc.constant('admit' as const),
    customer: fc.integer({ min: 0, max: 2 }),
    variant: fc.integer({ min: 0, max: 3 }),
    shared: fc.integer({ min: 0, max: 4 }),
    blocks: fc.integer({ min: 1, max: 8 }),
  }),
  fc.record({ kind: fc.constant('finish' as const), pick: fc.nat() }),
);

test('admissions always find their cached prefix, and claimed keys stay physically held', () => {
  fc.assert(
    fc.property(fc.integer({ min: 2, max: 5 }), fc.array(op, { maxLength: 60 }), (size, ops) => {
      const map = new SequenceMap(size);
      const claimed = new Set<number>();
      const running: { id: string; keys: number[] }[] = [];
      let ids = 0;
      for (const o of ops) {
        if (o.kind === 'finish') {
          if (running.length === 0) continue;
          const [done] = running.splice(o.pick % running.length, 1);
          map.release(done!.id);
          continue;
        }
        if (running.length >= size - 1) continue; // the runtime keeps one sequence spare
        const keys = promptKeys(o.customer, o.variant, Math.min(o.shared, o.blocks), o.blocks);
        let cached = 0;
        while (cached < keys.length - 1 && claimed.has(keys[cached]!)) cached++;
        const placement = map.place(keys, cached, new Set());
        assert.equal(map.ownerOf(placement.target), null, 'the target was idle');
        const from = placement.source ?? placement.target;
        assert.deepEqual(map.keysOf(from).slice(0, cached), keys.slice(0, cached));
        const id = `r${ids++}`;
        map.assign(id, placement, keys);
        for (const k of placement.lost) if (!map.holds(k)) claimed.delete(k);
        // The request computes its whole prompt: its blocks are stored.
        map.setKeys(id, keys);
        for (const k of keys) claimed.add(k);
        running.push({ id, keys });
        for (const k of claimed) assert.ok(map.holds(k), `claimed key ${k} is held`);
      }
    }),
    { numRuns: 300 },
  );
});

test('an idle sequence holding the prefix is reused in place; a running one is copied from', () => {
  const map = new SequenceMap(3);
  const keys = [1, 2, 3, 4];
  const first = map.place(keys, 0, new Set());
  map.assign('a', first, keys);
  map.setKeys('a', keys);
  // Running: a second request with the same prefix copies it into another sequence.
  const copy = map.place([1, 2, 9], 2, new Set());
  assert.equal(copy.source, first.target);
  assert.notEqual(copy.target, first.target);
  map.assign('b', copy, [1, 2, 9]);
  map.release('a');
  // Idle now: reused in place, keeping two blocks and losing the other two.
  const inPlace = map.place([1, 2, 7, 8], 2, new Set());
  assert.equal(inPlace.source, null);
  assert.deepEqual(inPlace.lost, [3, 4]);
  // Nothing cached anywhere: refused loudly rather than recomputed silently.
  assert.throws(() => map.place([5, 6], 1, new Set()), /no sequence holds/);
});
