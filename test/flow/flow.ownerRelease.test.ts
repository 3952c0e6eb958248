/**
 * Owner release: the readiness rule (`src/flow/ownerRelease.ts`) and the queue's `dequeue`
 * with a readiness test, which passes requests that are not ready while keeping strict priority
 * and the fair share by tokens over what it takes.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { type FlowItem, FlowQueue } from '../../src/flow/flowQueue.ts';
import { ownerReady } from '../../src/flow/ownerRelease.ts';

const OPTS = { slackTokens: 1000, holdMs: 500 };

describe('ownerReady', () => {
  test('ready when the cache owner has room, or one with room is within the slack', () => {
    // Replica 1 caches 6,000 tokens; replica 0 has room and caches nothing.
    assert.equal(ownerReady([0, 6000], [true, true], [true, false], 0, OPTS), false);
    assert.equal(ownerReady([0, 6000], [true, true], [true, true], 0, OPTS), true);
    assert.equal(ownerReady([5500, 6000], [true, true], [true, false], 0, OPTS), true);
  });

  test('cached nowhere: ready wherever there is room; no room anywhere: never', () => {
    assert.equal(ownerReady([0, 0], [true, true], [false, true], 0, OPTS), true);
    assert.equal(ownerReady([0, 6000], [true, true], [false, false], 10_000, OPTS), false);
  });

  test('an owner that is not eligible does not count; a long wait goes anywhere with room', () => {
    assert.equal(ownerReady([0, 6000], [true, false], [true, false], 0, OPTS), true);
    assert.equal(ownerReady([0, 6000], [true, true], [true, false], 499, OPTS), false);
    assert.equal(ownerReady([0, 6000], [true, true], [true, false], 500, OPTS), true);
  });
});

const TENANTS = ['t0', 't1', 't2'] as const;
const CLASSES = [
  { name: 'low', priority: 0 },
  { name: 'high', priority: 9 },
];

function queue(weights: Record<string, number> = {}): FlowQueue<boolean> {
  return new FlowQueue<boolean>({
    classes: CLASSES,
    tenantWeights: weights,
    maxQueued: 10_000,
    maxQueuedPerTenant: 10_000,
    maxWaitMs: 1e9,
  });
}

let n = 0;
function item(tenant: string, costTokens: number, ready: boolean, cls = 'low'): FlowItem<boolean> {
  return { id: `o${n++}`, tenant, priorityClass: cls, costTokens, arrivedMs: 0, payload: ready };
}

describe('FlowQueue.dequeue (with a readiness test)', () => {
  test('passes items that are not ready, within the look-ahead, and keeps strict priority', () => {
    const q = queue();
    const blocked = item('t0', 100, false);
    const behind = item('t0', 100, true);
    const other = item('t1', 100, true);
    for (const it of [blocked, behind, other]) q.enqueue(it);
    // t0's head is first by tag but not ready: the ready item behind it goes.
    assert.equal(q.dequeue((i) => i.payload, 2)?.id, behind.id);
    // Look-ahead 1 sees only heads: t1's goes.
    assert.equal(q.dequeue((i) => i.payload, 1)?.id, other.id);
    assert.equal(
      q.dequeue((i) => i.payload, 8),
      undefined,
      'nothing ready',
    );
    assert.equal(q.size, 1);
    const high = item('t2', 100, false, 'high');
    q.enqueue(high);
    blocked.payload = true;
    assert.equal(
      q.dequeue((i) => i.payload, 8),
      undefined,
      'a lower class waits for a higher',
    );
    assert.equal(q.dequeue(() => true, 8)?.id, high.id);
    assert.equal(q.dequeue(() => true, 8)?.id, blocked.id);
  });

  test('with every item ready it is dequeue', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            tenant: fc.nat(TENANTS.length - 1),
            cls: fc.nat(CLASSES.length - 1),
            cost: fc.integer({ min: 0, max: 4000 }),
            take: fc.boolean(),
          }),
          { maxLength: 200 },
        ),
        fc.integer({ min: 1, max: 8 }),
        (ops, lookAhead) => {
          const a = queue({ t1: 2 });
          const b = queue({ t1: 2 });
          let id = 0;
          for (const op of ops) {
            if (op.take) {
              assert.equal(a.dequeue(() => true, lookAhead)?.id, b.dequeue()?.id);
              continue;
            }
            const it: FlowItem<boolean> = {
              id: `e${id++}`,
              tenant: TENANTS[op.tenant]!,
              priorityClass: CLASSES[op.cls]!.name,
              costTokens: op.cost,
              arrivedMs: 0,
              payload: true,
            };
            a.enqueue(it);
            b.enqueue({ ...it });
          }
        },
      ),
      { numRuns: 100 },
    );
  });

  test('fair share by tokens holds between tenants whose items are ready, whatever others are not', () => {
    // t0 and t1 are always ready; t2's items are ready or not at random. Over any stretch where
    // t0 and t1 both have work queued: |tokens_0 / w_0 - tokens_1 / w_1| <= maxCost_0 / w_0 +
    // maxCost_1 / w_1 (start-time fair queueing's bound, as for dequeue).
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            {
              weight: 3,
              arbitrary: fc.record({
                tenant: fc.nat(TENANTS.length - 1),
                cost: fc.integer({ min: 1, max: 4000 }),
                ready: fc.boolean(),
              }),
            },
            { weight: 2, arbitrary: fc.constant(null) },
          ),
          { maxLength: 300 },
        ),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 4 }),
        (ops, w0, w1) => {
          const q = queue({ t0: w0, t1: w1 });
          const maxCost = [0, 0];
          let served: [number, number] | null = null;
          const take = () => {
            const both = q.sizeOf('t0') > 0 && q.sizeOf('t1') > 0;
            const got = q.dequeue((i) => i.payload, 4);
            if (got === undefined) return false;
            if (both && served !== null) {
              if (got.tenant === 't0') served[0] += got.costTokens;
              if (got.tenant === 't1') served[1] += got.costTokens;
              const gap = Math.abs(served[0] / w0 - served[1] / w1);
              const bound = maxCost[0]! / w0 + maxCost[1]! / w1;
              assert.ok(gap <= bound + 1e-9, `gap ${gap} > ${bound}`);
            }
            if (q.sizeOf('t0') === 0 || q.sizeOf('t1') === 0) served = null;
            return true;
          };
          for (const op of ops) {
            if (op === null) {
              take();
              continue;
            }
            const tenant = TENANTS[op.tenant]!;
            q.enqueue(item(tenant, op.cost, tenant === 't2' ? op.ready : true));
            if (op.tenant < 2) maxCost[op.tenant] = Math.max(maxCost[op.tenant]!, op.cost);
            if (served === null && q.sizeOf('t0') > 0 && q.sizeOf('t1') > 0) served = [0, 0];
          }
          while (take()) {}
        },
      ),
      { numRuns: 200 },
    );
  });
});
