/**
 * FreeBlockQueue.takeFront (one walk, one relink of the head) against `count` popFront calls on a
 * twin queue: random pushes at both ends, removals from the middle and takes of every size leave
 * both queues with the same blocks in the same order, the same size and the same membership.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { FreeBlockQueue } from '../../src/kv/freeBlockQueue.ts';

const CAPACITY = 12;
const op = fc.oneof(
  fc.record({ kind: fc.constant('back' as const), block: fc.nat(CAPACITY - 1) }),
  fc.record({ kind: fc.constant('front' as const), block: fc.nat(CAPACITY - 1) }),
  fc.record({ kind: fc.constant('remove' as const), block: fc.nat(CAPACITY - 1) }),
  fc.record({ kind: fc.constant('take' as const), count: fc.nat(CAPACITY) }),
);

test('takeFront leaves the queue as that many popFront calls do', () => {
  fc.assert(
    fc.property(fc.array(op, { maxLength: 60, size: 'max' }), (ops) => {
      const taken = new FreeBlockQueue(CAPACITY);
      const popped = new FreeBlockQueue(CAPACITY);
      for (const o of ops) {
        if (o.kind === 'take') {
          const count = Math.min(o.count, taken.size);
          const out = [99];
          taken.takeFront(count, out);
          const want = [99];
          for (let i = 0; i < count; i++) want.push(popped.popFront());
          assert.deepEqual(out, want);
        } else if (o.kind === 'remove') {
          if (!taken.has(o.block)) continue;
          taken.remove(o.block);
          popped.remove(o.block);
        } else {
          if (taken.has(o.block)) continue;
          if (o.kind === 'back') {
            taken.pushBack(o.block);
            popped.pushBack(o.block);
          } else {
            taken.pushFront(o.block);
            popped.pushFront(o.block);
          }
        }
        assert.deepEqual(taken.toArray(), popped.toArray());
        assert.equal(taken.size, popped.size);
        for (let b = 0; b < CAPACITY; b++) assert.equal(taken.has(b), popped.has(b));
      }
    }),
    { numRuns: 300 },
  );
});

test('takeFront refuses more blocks than the queue holds and changes nothing', () => {
  const q = new FreeBlockQueue(4);
  q.pushBack(2);
  q.pushBack(0);
  assert.throws(() => q.takeFront(3, []), {
    name: 'Error',
    message: '3 blocks asked of a free list of 2',
  });
  assert.deepEqual(q.toArray(), [2, 0]);
  const out: number[] = [];
  q.takeFront(2, out);
  assert.deepEqual(out, [2, 0]);
  assert.equal(q.size, 0);
  assert.equal(q.peekFront(), -1);
  q.pushFront(3);
  assert.deepEqual(q.toArray(), [3]);
});
