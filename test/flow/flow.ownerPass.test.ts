/**
 * Owner release's pass inside a tenant (`ownerVerdict`, `mayPassWithin` in
 * `src/flow/ownerRelease.ts`, `FlowQueue.dequeue`'s 'preferred' verdict and `mayPass`): a request
 * that goes warm passes earlier ones of its tenant that would go cold while they are young; the
 * tenant that goes is the fair order's, so the fair share by tokens holds; an earlier ready
 * request past the bound is never passed.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { type FlowItem, FlowQueue, type ReadyVerdict } from '../../src/flow/flowQueue.ts';
import { mayPassWithin, ownerVerdict } from '../../src/flow/ownerRelease.ts';

const OPTS = { slackTokens: 1000, holdMs: 400 };

describe('ownerVerdict', () => {
  test("'preferred' when a replica with room caches the prompt, true when only the hold made it ready", () => {
    // Replica 1 caches 6,000 tokens; replica 0 caches nothing.
    assert.equal(ownerVerdict([0, 6000], [true, true], [true, true], 0, OPTS), 'preferred');
    assert.equal(ownerVerdict([5500, 6000], [true, true], [true, false], 0, OPTS), 'preferred');
    assert.equal(ownerVerdict([0, 6000], [true, true], [true, false], 399, OPTS), false);
    assert.equal(ownerVerdict([0, 6000], [true, true], [true, false], 400, OPTS), true);
    assert.equal(ownerVerdict([0, 6000], [true, true], [false, false], 10_000, OPTS), false);
  });

  test('cached nowhere: it goes as warm as it can anywhere with room', () => {
    assert.equal(ownerVerdict([0, 0], [true, true], [false, true], 0, OPTS), 'preferred');
  });
});

describe('mayPassWithin', () => {
  test('an item younger than the bound may be passed, one as old or older may not', () => {
    const may = mayPassWithin(10_000, 2000);
    assert.equal(may({ arrivedMs: 8001 }), true);
    assert.equal(may({ arrivedMs: 8000 }), false);
    assert.equal(may({ arrivedMs: 0 }), false);
  });
});

interface Payload {
  verdict: ReadyVerdict;
  young: boolean;
}

function queue(weights: Record<string, number> = {}): FlowQueue<Payload> {
  return new FlowQueue<Payload>({
    classes: [{ name: 'standard', priority: 1 }],
    tenantWeights: weights,
    maxQueued: 10_000,
    maxQueuedPerTenant: 10_000,
    maxWaitMs: 1e9,
  });
}

let n = 0;
function item(tenant: string, costTokens: number, verdict: ReadyVerdict, young = true) {
  return {
    id: `p${n++}`,
    tenant,
    priorityClass: 'standard',
    costTokens,
    arrivedMs: 0,
    payload: { verdict, young },
  } satisfies FlowItem<Payload>;
}

const verdictOf = (i: FlowItem<Payload>) => i.payload.verdict;
const youngOnes = (i: FlowItem<Payload>) => i.payload.young;

describe("FlowQueue.dequeue with 'preferred'", () => {
  test('a preferred item passes an earlier ready one that may be passed, not one past the bound', () => {
    const q = queue();
    const cold = item('t0', 100, true, true);
    const warm = item('t0', 100, 'preferred');
    q.enqueue(cold);
    q.enqueue(warm);
    assert.equal(q.dequeue(verdictOf, 4, undefined, youngOnes)?.id, warm.id);
    assert.equal(q.dequeue(verdictOf, 4, undefined, youngOnes)?.id, cold.id);

    const old = item('t0', 100, true, false);
    const warm2 = item('t0', 100, 'preferred');
    q.enqueue(old);
    q.enqueue(warm2);
    assert.equal(q.dequeue(verdictOf, 4, undefined, youngOnes)?.id, old.id);
    assert.equal(q.dequeue(verdictOf, 4, undefined, youngOnes)?.id, warm2.id);
  });

  test('without mayPass the first item accepted goes, preferred or not (the former order)', () => {
    const q = queue();
    const cold = item('t0', 100, true);
    q.enqueue(cold);
    q.enqueue(item('t0', 100, 'preferred'));
    assert.equal(q.dequeue(verdictOf, 4)?.id, cold.id);
  });

  test('the tenant that goes is the fair order’s, even when another has a preferred item', () => {
    const q = queue();
    const first = item('t0', 100, true);
    q.enqueue(first);
    q.enqueue(item('t1', 100, 'preferred'));
    assert.equal(q.dequeue(verdictOf, 4, undefined, youngOnes)?.id, first.id);
  });

  test('beyond the look-ahead nothing passes', () => {
    const q = queue();
    const cold = item('t0', 100, true);
    q.enqueue(cold);
    q.enqueue(item('t0', 100, false));
    q.enqueue(item('t0', 100, 'preferred'));
    assert.equal(q.dequeue(verdictOf, 2, undefined, youngOnes)?.id, cold.id);
  });

  test('fair share by tokens and the FIFO bound hold, whatever the verdicts', () => {
    // t0 and t1 always have a ready item (true or 'preferred'); t2's may not be ready. Over any
    // stretch where t0 and t1 both have work queued, neither's tokens over its weight fall below
    // the other's by more than one largest request of each (the share form: a tenant's share of
    // the dispatched tokens is not below its weight's share, up to one request of each). And an
    // item taken never passed an earlier ready item of its tenant that may not be passed.
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            {
              weight: 3,
              arbitrary: fc.record({
                tenant: fc.nat(2),
                cost: fc.integer({ min: 1, max: 4000 }),
                verdict: fc.constantFrom<ReadyVerdict>(false, true, 'preferred'),
                young: fc.boolean(),
              }),
            },
            { weight: 2, arbitrary: fc.constant(null) },
          ),
          { maxLength: 300 },
        ),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 6 }),
        (ops, w0, w1, lookAhead) => {
          const q = queue({ t0: w0, t1: w1 });
          const maxCost = [0, 0];
          const lanes = new Map<string, FlowItem<Payload>[]>();
          let served: [number, number] | null = null;
          const take = () => {
            const both = q.sizeOf('t0') > 0 && q.sizeOf('t1') > 0;
            const got = q.dequeue(verdictOf, lookAhead, undefined, youngOnes);
            if (got === undefined) return false;
            const lane = lanes.get(got.tenant)!;
            const at = lane.findIndex((i) => i.id === got.id);
            for (const ahead of lane.slice(0, at)) {
              const passable =
                ahead.payload.verdict === false ||
                (ahead.payload.young && got.payload.verdict === 'preferred');
              assert.ok(passable, `${got.id} passed ${ahead.id}, ready and past the bound`);
            }
            lane.splice(at, 1);
            if (both && served !== null) {
              if (got.tenant === 't0') served[0] += got.costTokens;
              if (got.tenant === 't1') served[1] += got.costTokens;
              const bound = maxCost[0]! / w0 + maxCost[1]! / w1;
              assert.ok(served[0] / w0 >= served[1] / w1 - bound - 1e-9, 't0 below its share');
              assert.ok(served[1] / w1 >= served[0] / w0 - bound - 1e-9, 't1 below its share');
            }
            if (q.sizeOf('t0') === 0 || q.sizeOf('t1') === 0) served = null;
            return true;
          };
          for (const op of ops) {
            if (op === null) {
              take();
              continue;
            }
            const tenant = `t${op.tenant}`;
            // t0 and t1: never "not ready", so the fair share between them is what is tested.
            const verdict = op.tenant < 2 && op.verdict === false ? true : op.verdict;
            const it = item(tenant, op.cost, verdict, op.young);
            q.enqueue(it);
            lanes.set(tenant, [...(lanes.get(tenant) ?? []), it]);
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
