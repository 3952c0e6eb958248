/** The flow-control queue: strict priority between classes, token-weighted fair share inside one. */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { type FlowItem, FlowQueue, type FlowQueueOptions } from '../../src/flow/flowQueue.ts';

const options = (o: Partial<FlowQueueOptions> = {}): FlowQueueOptions => ({
  classes: [{ name: 'standard', priority: 0 }],
  maxQueued: 1000,
  maxQueuedPerTenant: 1000,
  maxWaitMs: 10_000,
  ...o,
});

let nextId = 0;
function item(tenant: string, costTokens: number, extra: Partial<FlowItem<null>> = {}) {
  return {
    id: `r${nextId++}`,
    tenant,
    priorityClass: 'standard',
    costTokens,
    arrivedMs: 0,
    payload: null,
    ...extra,
  };
}

function drain<T>(q: FlowQueue<T>): FlowItem<T>[] {
  const out: FlowItem<T>[] = [];
  for (let it = q.dequeue(); it !== undefined; it = q.dequeue()) out.push(it);
  return out;
}

describe('FlowQueue', () => {
  test('a tenant with long prompts does not starve one with short prompts', () => {
    const q = new FlowQueue<null>(options());
    for (let i = 0; i < 10; i++) assert.deepEqual(q.enqueue(item('heavy', 4000)), { ok: true });
    for (let i = 0; i < 40; i++) assert.deepEqual(q.enqueue(item('light', 100)), { ok: true });
    const first = drain(q).slice(0, 20);
    const lightTokens = first.filter((i) => i.tenant === 'light').length * 100;
    const heavyTokens = first.filter((i) => i.tenant === 'heavy').length * 4000;
    // By tokens, not by requests: 40 light requests (4000 tokens) cost as much as one heavy one.
    assert.ok(first.filter((i) => i.tenant === 'light').length >= 18, 'light goes first by count');
    assert.ok(heavyTokens <= lightTokens + 4000, `${heavyTokens} vs ${lightTokens}`);
  });

  test('weights split the dispatched tokens', () => {
    const q = new FlowQueue<null>(options({ tenantWeights: { gold: 3 } }));
    for (let i = 0; i < 100; i++) {
      q.enqueue(item('gold', 10));
      q.enqueue(item('free', 10));
    }
    const first = drain(q).slice(0, 80);
    assert.equal(first.filter((i) => i.tenant === 'gold').length, 60);
  });

  test('a higher class goes first; FIFO inside a tenant', () => {
    const q = new FlowQueue<null>(
      options({
        classes: [
          { name: 'batch', priority: -1 },
          { name: 'standard', priority: 0 },
          { name: 'critical', priority: 10 },
        ],
      }),
    );
    q.enqueue(item('a', 1, { id: 'b1', priorityClass: 'batch' }));
    q.enqueue(item('a', 1, { id: 's1' }));
    q.enqueue(item('a', 1, { id: 'c1', priorityClass: 'critical' }));
    q.enqueue(item('a', 1, { id: 's2' }));
    assert.deepEqual(q.enqueue(item('a', 1, { priorityClass: 'nope' })), {
      ok: false,
      reason: 'unknown-class',
    });
    assert.deepEqual(
      drain(q).map((i) => i.id),
      ['c1', 's1', 's2', 'b1'],
    );
  });

  test('bounds: the whole queue, then each tenant', () => {
    const q = new FlowQueue<null>(options({ maxQueued: 3, maxQueuedPerTenant: 2 }));
    assert.equal(q.enqueue(item('a', 1)).ok, true);
    assert.equal(q.enqueue(item('a', 1)).ok, true);
    assert.deepEqual(q.enqueue(item('a', 1)), { ok: false, reason: 'tenant-full' });
    assert.equal(q.enqueue(item('b', 1)).ok, true);
    assert.deepEqual(q.enqueue(item('c', 1)), { ok: false, reason: 'queue-full' });
    assert.equal(q.size, 3);
    assert.equal(q.sizeOf('a'), 2);
    q.dequeue();
    assert.equal(q.enqueue(item('c', 1)).ok, true);
  });

  test('expire returns what waited maxWaitMs; remove takes out a queued item once', () => {
    const q = new FlowQueue<null>(options({ maxWaitMs: 100 }));
    q.enqueue(item('a', 5, { id: 'early', arrivedMs: 0 }));
    q.enqueue(item('a', 5, { id: 'late', arrivedMs: 50 }));
    q.enqueue(item('b', 5, { id: 'gone', arrivedMs: 10 }));
    assert.equal(q.nextDeadlineMs(), 100);
    assert.equal(q.remove('gone')?.id, 'gone');
    assert.equal(q.remove('gone'), undefined);
    assert.deepEqual(q.expire(99), []);
    assert.deepEqual(
      q.expire(100).map((i) => i.id),
      ['early'],
    );
    assert.equal(q.nextDeadlineMs(), 150);
    assert.deepEqual(
      drain(q).map((i) => i.id),
      ['late'],
    );
    assert.equal(q.nextDeadlineMs(), undefined);
  });

  test('stats per class and tenant', () => {
    const q = new FlowQueue<null>(
      options({
        classes: [
          { name: 'standard', priority: 0 },
          { name: 'critical', priority: 1 },
        ],
      }),
    );
    q.enqueue(item('a', 10));
    q.enqueue(item('a', 20));
    q.enqueue(item('b', 5, { priorityClass: 'critical' }));
    assert.deepEqual(q.stats(), {
      queued: 3,
      queuedTokens: 35,
      classes: [
        {
          name: 'critical',
          priority: 1,
          queued: 1,
          queuedTokens: 5,
          tenants: [{ tenant: 'b', queued: 1, queuedTokens: 5 }],
        },
        {
          name: 'standard',
          priority: 0,
          queued: 2,
          queuedTokens: 30,
          tenants: [{ tenant: 'a', queued: 2, queuedTokens: 30 }],
        },
      ],
    });
  });

  test('bad options and items are refused', () => {
    assert.throws(() => new FlowQueue(options({ classes: [] })), RangeError);
    assert.throws(() => new FlowQueue(options({ tenantWeights: { a: 0 } })), RangeError);
    assert.throws(() => new FlowQueue(options({ maxQueued: -1 })), RangeError);
    assert.throws(
      () =>
        new FlowQueue(
          options({
            classes: [
              { name: 'x', priority: 0 },
              { name: 'x', priority: 1 },
            ],
          }),
        ),
      RangeError,
    );
    const q = new FlowQueue<null>(options());
    q.enqueue(item('a', 1, { id: 'dup' }));
    assert.throws(() => q.enqueue(item('a', 1, { id: 'dup' })));
    assert.throws(() => q.enqueue(item('a', -1)), RangeError);
  });
});

// ---- properties -------------------------------------------------------------------------------

const TENANTS = ['t0', 't1', 't2', 't3'] as const;
const CLASSES = [
  { name: 'low', priority: 0 },
  { name: 'mid', priority: 5 },
  { name: 'high', priority: 9 },
];
const priorityOf = new Map(CLASSES.map((c) => [c.name, c.priority]));

type Op =
  | { kind: 'enqueue'; tenant: number; cls: number; cost: number; dtMs: number }
  | { kind: 'dequeue' }
  | { kind: 'remove'; pick: number }
  | { kind: 'expire'; dtMs: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('enqueue' as const),
      tenant: fc.nat(TENANTS.length - 1),
      cls: fc.nat(CLASSES.length - 1),
      cost: fc.integer({ min: 0, max: 5000 }),
      dtMs: fc.integer({ min: 0, max: 40 }),
    }),
  },
  { weight: 3, arbitrary: fc.constant({ kind: 'dequeue' as const }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('remove' as const), pick: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('expire' as const),
      dtMs: fc.integer({ min: 0, max: 100 }),
    }),
  },
);

describe('FlowQueue properties', () => {
  test('bounds, strict priority, FIFO per tenant, deadlines, cancellation, conservation', () => {
    fc.assert(
      fc.property(
        fc.array(opArb, { maxLength: 300 }),
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 1, max: 15 }),
        fc.integer({ min: 0, max: 300 }),
        fc.dictionary(fc.constantFrom(...TENANTS), fc.integer({ min: 1, max: 8 })),
        (ops, maxQueued, maxQueuedPerTenant, maxWaitMs, tenantWeights) => {
          const q = new FlowQueue<number>({
            classes: CLASSES,
            tenantWeights,
            maxQueued,
            maxQueuedPerTenant,
            maxWaitMs,
          });
          // The reference: queued items in enqueue order.
          let model: FlowItem<number>[] = [];
          const removed = new Set<string>();
          let nowMs = 0;
          let seq = 0;
          let accepted = 0;
          let ended = 0;
          for (const op of ops) {
            if (op.kind === 'enqueue') {
              nowMs += op.dtMs;
              const it: FlowItem<number> = {
                id: `i${seq}`,
                tenant: TENANTS[op.tenant] as string,
                priorityClass: (CLASSES[op.cls] as { name: string }).name,
                costTokens: op.cost,
                arrivedMs: nowMs,
                payload: seq++,
              };
              const result = q.enqueue(it);
              const tenantQueued = model.filter((m) => m.tenant === it.tenant).length;
              if (model.length >= maxQueued) {
                assert.deepEqual(result, { ok: false, reason: 'queue-full' });
              } else if (tenantQueued >= maxQueuedPerTenant) {
                assert.deepEqual(result, { ok: false, reason: 'tenant-full' });
              } else {
                assert.deepEqual(result, { ok: true });
                model.push(it);
                accepted++;
              }
            } else if (op.kind === 'dequeue') {
              const got = q.dequeue();
              if (model.length === 0) {
                assert.equal(got, undefined);
                continue;
              }
              assert.ok(got !== undefined);
              assert.ok(!removed.has(got.id), 'a removed item is never dispatched');
              const top = Math.max(...model.map((m) => priorityOf.get(m.priorityClass) ?? 0));
              assert.equal(priorityOf.get(got.priorityClass), top, 'strict priority');
              const laneHead = model.find(
                (m) => m.tenant === got.tenant && m.priorityClass === got.priorityClass,
              );
              assert.equal(got.id, laneHead?.id, 'FIFO inside a tenant');
              model = model.filter((m) => m.id !== got.id);
              ended++;
            } else if (op.kind === 'remove') {
              if (model.length === 0) {
                assert.equal(q.remove(`i${op.pick}`), undefined);
                continue;
              }
              const victim = model[op.pick % model.length] as FlowItem<number>;
              assert.equal(q.remove(victim.id)?.id, victim.id);
              assert.equal(q.remove(victim.id), undefined);
              removed.add(victim.id);
              model = model.filter((m) => m.id !== victim.id);
              ended++;
            } else {
              nowMs += op.dtMs;
              const due = model.filter((m) => m.arrivedMs + maxWaitMs <= nowMs).map((m) => m.id);
              const got = q.expire(nowMs).map((m) => m.id);
              assert.deepEqual([...got].sort(), [...due].sort(), 'expire returns exactly the due');
              model = model.filter((m) => !due.includes(m.id));
              ended += due.length;
            }
            assert.ok(q.size <= maxQueued);
            for (const t of TENANTS) assert.ok(q.sizeOf(t) <= maxQueuedPerTenant);
            assert.equal(q.size, model.length);
            const stats = q.stats();
            assert.equal(stats.queued, model.length);
            assert.equal(
              stats.queuedTokens,
              model.reduce((s, m) => s + m.costTokens, 0),
            );
          }
          assert.equal(accepted, ended + q.size, 'every accepted item ends or is still queued');
        },
      ),
      { numRuns: 200 },
    );
  });

  test('fair share by tokens: two tenants both queued stay within one item of their weighted shares', () => {
    // Goyal et al.'s bound for start-time fair queueing: over any stretch where tenants i and j
    // both have work queued, |tokens_i / w_i - tokens_j / w_j| <= maxCost_i / w_i + maxCost_j / w_j.
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            {
              weight: 3,
              arbitrary: fc.record({
                tenant: fc.nat(TENANTS.length - 1),
                cost: fc.integer({ min: 1, max: 4000 }),
              }),
            },
            { weight: 2, arbitrary: fc.constant(null) },
          ),
          { maxLength: 400 },
        ),
        fc.array(fc.integer({ min: 1, max: 6 }), {
          minLength: TENANTS.length,
          maxLength: TENANTS.length,
        }),
        (ops, weightList) => {
          const weights = Object.fromEntries(TENANTS.map((t, i) => [t, weightList[i] ?? 1]));
          const q = new FlowQueue<null>({
            classes: [{ name: 'standard', priority: 0 }],
            tenantWeights: weights,
            maxQueued: 10_000,
            maxQueuedPerTenant: 10_000,
            maxWaitMs: 1e9,
          });
          const maxCost = new Map<string, number>(TENANTS.map((t) => [t, 0]));
          // Tokens dispatched to each tenant since the pair (i, j) has been continuously queued.
          const since = new Map<string, Map<string, number>>();
          const key = (i: string, j: string) => `${i}|${j}`;
          const backlogged = () => TENANTS.filter((t) => q.sizeOf(t) > 0);
          let n = 0;
          const step = (op: { tenant: number; cost: number } | null) => {
            if (op !== null) {
              const tenant = TENANTS[op.tenant] as string;
              q.enqueue({
                id: `f${n++}`,
                tenant,
                priorityClass: 'standard',
                costTokens: op.cost,
                arrivedMs: 0,
                payload: null,
              });
              maxCost.set(tenant, Math.max(maxCost.get(tenant) ?? 0, op.cost));
              for (const other of backlogged()) {
                if (other === tenant) continue;
                for (const k of [key(tenant, other), key(other, tenant)]) {
                  if (!since.has(k)) since.set(k, new Map());
                }
              }
              return;
            }
            const before = backlogged();
            const got = q.dequeue();
            if (got === undefined) return;
            for (const i of before) {
              for (const j of before) {
                if (i === j) continue;
                const served = since.get(key(i, j));
                if (served === undefined) continue;
                served.set(got.tenant, (served.get(got.tenant) ?? 0) + got.costTokens);
                const wi = weights[i] ?? 1;
                const wj = weights[j] ?? 1;
                const gap = Math.abs((served.get(i) ?? 0) / wi - (served.get(j) ?? 0) / wj);
                const bound = (maxCost.get(i) ?? 0) / wi + (maxCost.get(j) ?? 0) / wj;
                assert.ok(gap <= bound + 1e-9, `${i} vs ${j}: gap ${gap} > ${bound}`);
              }
            }
            for (const t of TENANTS) {
              if (q.sizeOf(t) > 0) continue;
              for (const k of [...since.keys()]) {
                if (k.startsWith(`${t}|`) || k.endsWith(`|${t}`)) since.delete(k);
              }
            }
          };
          for (const op of ops) step(op);
          while (q.size > 0) step(null);
        },
      ),
      { numRuns: 200 },
    );
  });

  test("a tenant's share of dispatched tokens is not below its weight's share, up to one item per other tenant", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            tenant: fc.nat(TENANTS.length - 1),
            cost: fc.integer({ min: 1, max: 4000 }),
          }),
          { minLength: 1, maxLength: 200 },
        ),
        fc.array(fc.integer({ min: 1, max: 6 }), {
          minLength: TENANTS.length,
          maxLength: TENANTS.length,
        }),
        (arrivals, weightList) => {
          const weights = Object.fromEntries(TENANTS.map((t, i) => [t, weightList[i] ?? 1]));
          const q = new FlowQueue<null>({
            classes: [{ name: 'standard', priority: 0 }],
            tenantWeights: weights,
            maxQueued: 10_000,
            maxQueuedPerTenant: 10_000,
            maxWaitMs: 1e9,
          });
          const maxCost = new Map<string, number>();
          arrivals.forEach((a, n) => {
            const tenant = TENANTS[a.tenant] as string;
            q.enqueue({
              id: `s${n}`,
              tenant,
              priorityClass: 'standard',
              costTokens: a.cost,
              arrivedMs: 0,
              payload: null,
            });
            maxCost.set(tenant, Math.max(maxCost.get(tenant) ?? 0, a.cost));
          });
          const present = [...maxCost.keys()];
          const totalWeight = present.reduce((s, t) => s + (weights[t] ?? 1), 0);
          const served = new Map<string, number>();
          let total = 0;
          // Everyone queued from the start: check each prefix while all still have work.
          while (present.every((t) => q.sizeOf(t) > 0)) {
            const got = q.dequeue() as FlowItem<null>;
            served.set(got.tenant, (served.get(got.tenant) ?? 0) + got.costTokens);
            total += got.costTokens;
            for (const i of present) {
              const share = (weights[i] ?? 1) / totalWeight;
              const othersMax = present
                .filter((j) => j !== i)
                .reduce((s, j) => s + (maxCost.get(j) ?? 0), 0);
              const floor = share * (total - othersMax);
              assert.ok(
                (served.get(i) ?? 0) >= floor - 1e-9,
                `${i}: ${served.get(i) ?? 0} < ${floor}`,
              );
            }
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('FlowQueue.reconfigure (a config reload)', () => {
  test('waiting requests keep their places; a new weight applies to later tags', () => {
    const q = new FlowQueue<null>(options());
    for (let i = 0; i < 4; i++) q.enqueue(item('a', 100));
    for (let i = 0; i < 4; i++) q.enqueue(item('b', 100));
    q.reconfigure(options({ tenantWeights: { a: 3 } }));
    assert.equal(q.size, 8);
    const order = drain(q).map((i) => i.tenant);
    // Heads were tagged at weight 1 (a, b); after them a's tags advance a third as fast.
    assert.deepEqual(order, ['a', 'b', 'a', 'a', 'a', 'b', 'b', 'b']);
  });

  test('a dropped class keeps what waits in it, takes no more, and is gone once empty', () => {
    const classes = [
      { name: 'high', priority: 5 },
      { name: 'standard', priority: 0 },
    ];
    const q = new FlowQueue<null>(options({ classes }));
    const waiting = item('a', 10, { priorityClass: 'high' });
    q.enqueue(waiting);
    q.enqueue(item('a', 10));
    q.reconfigure(options({ classes: [{ name: 'standard', priority: 9 }] }));
    assert.deepEqual(q.enqueue(item('b', 10, { priorityClass: 'high' })), {
      ok: false,
      reason: 'unknown-class',
    });
    // standard now outranks the dropped class.
    assert.equal(q.dequeue()?.priorityClass, 'standard');
    assert.equal(q.dequeue()?.id, waiting.id);
    assert.deepEqual(
      q.stats().classes.map((c) => c.name),
      ['standard'],
    );
    // Listed again, it takes requests again.
    q.reconfigure(options({ classes }));
    assert.deepEqual(q.enqueue(item('b', 10, { priorityClass: 'high' })), { ok: true });
  });

  test('the new deadline applies to waiting requests, the new bounds to later arrivals', () => {
    const q = new FlowQueue<null>(options());
    for (let i = 0; i < 3; i++) q.enqueue(item('a', 10, { arrivedMs: 0 }));
    q.reconfigure(options({ maxQueued: 2, maxQueuedPerTenant: 2, maxWaitMs: 500 }));
    assert.equal(q.size, 3, 'those waiting stay');
    assert.deepEqual(q.enqueue(item('b', 10, { arrivedMs: 400 })), {
      ok: false,
      reason: 'queue-full',
    });
    assert.equal(q.nextDeadlineMs(), 500);
    assert.equal(q.expire(500).length, 3);
    assert.deepEqual(q.enqueue(item('b', 10, { arrivedMs: 600 })), { ok: true });
  });

  test('refused settings change nothing', () => {
    const q = new FlowQueue<null>(options());
    q.enqueue(item('a', 10));
    assert.throws(() => q.reconfigure(options({ tenantWeights: { a: 0 } })), /weight of tenant a/);
    assert.throws(
      () =>
        q.reconfigure(
          options({
            classes: [
              { name: 'x', priority: 1 },
              { name: 'x', priority: 2 },
            ],
          }),
        ),
      /class x listed twice/,
    );
    assert.equal(q.weightOf('a'), 1);
    assert.equal(q.dequeue()?.priorityClass, 'standard');
  });
});
