/**
 * Finish-first dispatch for a sparse tenant's request and uncached charging
 * (`src/flow/ownerRelease.ts`), and the queue's fair share over charges given at dispatch
 * (`FlowQueue.dequeue`'s `charge`).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { type FlowItem, FlowQueue } from '../../src/flow/flowQueue.ts';
import {
  type FinishFirstReplica,
  finishFirstReplica,
  uncachedCharge,
} from '../../src/flow/ownerRelease.ts';

const MS_PER_TOKEN = 0.07;

function replica(over: Partial<FinishFirstReplica> = {}): FinishFirstReplica {
  return {
    eligible: true,
    room: true,
    openBesidesPrefill: true,
    queuedPrefillMs: 0,
    prefillMsPerToken: MS_PER_TOKEN,
    ...over,
  };
}

describe('finishFirstReplica', () => {
  test('the owner with room goes first; a busy owner is waited for while it ends sooner', () => {
    // Replica 1 caches 6,000 of the 8,000 tokens.
    const idle = [replica(), replica()];
    assert.equal(finishFirstReplica([0, 6000], 8000, idle, 1024), 1);
    // Owner busy with 300 ms of prefill: 300 + 140 ms against 560 ms cold: wait for it.
    const shortQueue = [replica(), replica({ room: false, queuedPrefillMs: 300 })];
    assert.equal(finishFirstReplica([0, 6000], 8000, shortQueue, 1024), -1);
  });

  test('an owner whose queue ends later than a cold prefill elsewhere is passed over', () => {
    // Owner busy with 560 ms (a cold 8,000-token prompt): 700 ms against 560 ms cold on 0.
    const busy = [replica(), replica({ room: false, queuedPrefillMs: 560 })];
    assert.equal(finishFirstReplica([0, 6000], 8000, busy, 1024), 0);
  });

  test('an owner past the other limits, ineligible replicas and no room anywhere: none', () => {
    const full = [
      replica(),
      replica({ room: false, openBesidesPrefill: false, queuedPrefillMs: 10 }),
    ];
    assert.equal(
      finishFirstReplica([0, 6000], 8000, full, 1024),
      0,
      'the owner is not a candidate',
    );
    const noRoom = [replica({ room: false, queuedPrefillMs: 900 }), replica({ eligible: false })];
    assert.equal(finishFirstReplica([0, 6000], 8000, noRoom, 1024), -1);
  });

  const replicas = fc.array(
    fc.record({
      eligible: fc.boolean(),
      room: fc.boolean(),
      openBesidesPrefill: fc.boolean(),
      queuedPrefillMs: fc.integer({ min: 0, max: 2000 }),
      prefillMsPerToken: fc.double({ min: 0.001, max: 1, noNaN: true }),
      cached: fc.integer({ min: 0, max: 9000 }),
    }),
    { minLength: 1, maxLength: 8 },
  );

  test('it picks a replica with room whose estimated finish no candidate beats', () => {
    fc.assert(
      fc.property(
        replicas,
        fc.integer({ min: 1, max: 8000 }),
        fc.nat(2000),
        (rs, prompt, slack) => {
          const view = rs.map(({ cached: _, ...r }) => ({ ...r, room: r.room && r.eligible }));
          const cached = rs.map((r) => r.cached);
          const at = finishFirstReplica(cached, prompt, view, slack);
          const best = Math.max(0, ...rs.filter((r) => r.eligible).map((r) => r.cached));
          const finish = (i: number) =>
            view[i]!.queuedPrefillMs +
            (prompt - Math.min(cached[i]!, prompt)) * view[i]!.prefillMsPerToken;
          const candidates = view
            .map((_, i) => i)
            .filter((i) => {
              const r = view[i]!;
              const c = Math.min(cached[i]!, prompt);
              return r.eligible && (r.room || (c > 0 && c >= best - slack && r.openBesidesPrefill));
            });
          if (at === -1) {
            // None, or the best is an owner without room.
            const roomed = candidates.filter((i) => view[i]!.room);
            if (roomed.length > 0) {
              const bestRoom = Math.min(...roomed.map(finish));
              assert.ok(candidates.some((i) => !view[i]!.room && finish(i) < bestRoom));
            }
            return;
          }
          assert.ok(view[at]!.room, 'only a replica with room is returned');
          for (const i of candidates) assert.ok(finish(at) <= finish(i));
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('uncachedCharge', () => {
  test('the prompt tokens the warmest replica with room does not cache, at least 1', () => {
    assert.equal(uncachedCharge([0, 6000], [true, true], 8000), 2000);
    assert.equal(uncachedCharge([0, 6000], [true, false], 8000), 8000);
    assert.equal(uncachedCharge([9000], [true], 8000), 1);
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.nat(10_000), fc.boolean()), { maxLength: 8 }),
        fc.integer({ min: 1, max: 10_000 }),
        (rs, prompt) => {
          const c = uncachedCharge(
            rs.map((r) => r[0]),
            rs.map((r) => r[1]),
            prompt,
          );
          assert.ok(c >= 1 && c <= prompt);
        },
      ),
    );
  });
});

describe('FlowQueue.dequeue (with a charge at dispatch)', () => {
  const TENANTS = ['t0', 't1', 't2'] as const;
  function queue(weights: Record<string, number>): FlowQueue<{ ready: boolean; charge: number }> {
    return new FlowQueue({
      classes: [{ name: 'std', priority: 0 }],
      tenantWeights: weights,
      maxQueued: 10_000,
      maxQueuedPerTenant: 10_000,
      maxWaitMs: 1e9,
    });
  }

  test('the fair share holds over the charges, whatever the items cost as queued', () => {
    // Over any stretch where t0 and t1 both have work queued: |charged_0 / w_0 - charged_1 /
    // w_1| <= maxCharge_0 / w_0 + maxCharge_1 / w_1, as for costTokens without a charge.
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            {
              weight: 3,
              arbitrary: fc.record({
                tenant: fc.nat(TENANTS.length - 1),
                cost: fc.integer({ min: 1, max: 8000 }),
                charge: fc.integer({ min: 1, max: 8000 }),
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
          const maxCharge = [0, 0];
          let served: [number, number] | null = null;
          let id = 0;
          const take = () => {
            const both = q.sizeOf('t0') > 0 && q.sizeOf('t1') > 0;
            const got = q.dequeue(
              (i) => i.payload.ready,
              4,
              (i) => i.payload.charge,
            );
            if (got === undefined) return false;
            if (both && served !== null) {
              if (got.tenant === 't0') served[0] += got.payload.charge;
              if (got.tenant === 't1') served[1] += got.payload.charge;
              const gap = Math.abs(served[0] / w0 - served[1] / w1);
              const bound = maxCharge[0]! / w0 + maxCharge[1]! / w1;
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
            const it: FlowItem<{ ready: boolean; charge: number }> = {
              id: `c${id++}`,
              tenant,
              priorityClass: 'std',
              costTokens: op.cost,
              arrivedMs: 0,
              payload: { ready: tenant === 't2' ? op.ready : true, charge: op.charge },
            };
            q.enqueue(it);
            if (op.tenant < 2) maxCharge[op.tenant] = Math.max(maxCharge[op.tenant]!, op.charge);
            if (served === null && q.sizeOf('t0') > 0 && q.sizeOf('t1') > 0) served = [0, 0];
          }
          while (take()) {}
        },
      ),
      { numRuns: 200 },
    );
  });
});
