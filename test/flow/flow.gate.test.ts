/**
 * The gateway's flow gate (src/serving/flowGate.ts) over the pure FlowQueue, with a saturation
 * switch and a clock of the test's own: straight through while nothing waits and the pool has
 * room; queued while saturated; 429 when full (the queue or a tenant's share), 503 past the
 * deadline, both with Retry-After; a cancelled waiter leaves at once; dispatch in class order,
 * one per turn; the metrics follow (the queued gauge back at 0 once drained).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Registry } from 'prom-client';
import { ApiError } from '../../src/openai/errors.ts';
import {
  FlowCancelled,
  type FlowPass,
  type FlowReadiness,
  PoolFlowGate,
} from '../../src/serving/flowGate.ts';
import { FlowMetrics } from '../../src/serving/flowMetrics.ts';
import { replicasToAvoid, replicasWithoutRoom } from '../../src/serving/flowView.ts';

interface Setup {
  gate: PoolFlowGate;
  registry: Registry;
  clock: { ms: number };
  sat: { on: boolean };
}

function setup(
  over: {
    maxQueued?: number;
    perTenant?: number;
    maxWaitMs?: number;
    readiness?: FlowReadiness;
    passMs?: number;
  } = {},
): Setup {
  const registry = new Registry();
  const clock = { ms: 1_000 };
  const sat = { on: false };
  let gate!: PoolFlowGate;
  const metrics = new FlowMetrics(registry, () => gate.queued());
  gate = new PoolFlowGate({
    classes: [
      { name: 'interactive', priority: 10 },
      { name: 'default', priority: 0 },
    ],
    tenantWeights: {},
    maxQueued: over.maxQueued ?? 10,
    maxQueuedPerTenant: over.perTenant ?? 10,
    maxWaitMs: over.maxWaitMs ?? 5_000,
    saturated: () => sat.on,
    ...(over.readiness && { readiness: () => over.readiness!, lookAhead: 4 }),
    ...(over.passMs !== undefined && { passMs: over.passMs }),
    poolLabel: 'm',
    tenantLabel: (t) => (t === '' ? 'none' : t),
    metrics,
    nowMs: () => clock.ms,
  });
  return { gate, registry, clock, sat };
}

const req = (id: string, tenant = 'a', priorityClass = 'default', costTokens = 100) => ({
  id,
  tenant,
  priorityClass,
  costTokens,
});

/** The promise of a request that waits (it must: not a pass to go on now). */
function waiting<T>(entered: T | Promise<T>, what = 'the request waits'): Promise<T> {
  assert.ok(entered instanceof Promise, what);
  return entered;
}

/** Lets queued setImmediate callbacks (the gate's next dispatch) run. */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

async function metric(registry: Registry, name: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const m of await registry.getMetricsAsJSON()) {
    if (m.name !== name) continue;
    for (const v of m.values as { labels: Record<string, string | number>; value: number }[]) {
      const labels = Object.entries(v.labels)
        .map(([k, x]) => `${k}=${x}`)
        .join(',');
      out.set(labels, v.value);
    }
  }
  return out;
}

describe('PoolFlowGate', () => {
  test('goes straight through while the pool has room and nobody waits', () => {
    const { gate } = setup();
    assert.deepEqual(gate.enter(req('r1')), { replica: null });
    assert.equal(gate.size, 0);
    gate.close();
  });

  test('waits while saturated; leaves in class order, one per turn, as room comes back', async () => {
    const s = setup();
    s.sat.on = true;
    const order: string[] = [];
    const waits = ['d1', 'd2', 'i1'].map((id) => {
      const p = waiting(
        s.gate.enter(req(id, 'a', id.startsWith('i') ? 'interactive' : 'default')),
        `${id} waits`,
      );
      return p.then(() => order.push(id));
    });
    assert.equal(s.gate.size, 3);
    const gauge = await metric(s.registry, 'kvroute_flow_queued');
    assert.equal(gauge.get('pool=m,class=default,tenant=a'), 2);
    assert.equal(gauge.get('pool=m,class=interactive,tenant=a'), 1);
    // Room for exactly one: the pool saturates again as soon as one has gone.
    s.sat.on = false;
    s.gate.pump();
    s.sat.on = true;
    await turn();
    await turn();
    assert.equal(s.gate.size, 2);
    s.sat.on = false;
    s.gate.pump();
    await Promise.all(waits);
    assert.deepEqual(order, ['i1', 'd1', 'd2']);
    assert.equal((await metric(s.registry, 'kvroute_flow_dispatched_total')).size, 2);
    const queued = await metric(s.registry, 'kvroute_flow_queued');
    assert.equal(queued.size, 2);
    for (const v of queued.values()) assert.equal(v, 0, 'drained: every series reads 0');
    s.gate.close();
  });

  test('a new arrival queues behind those waiting even when the pool has room', async () => {
    const s = setup();
    s.sat.on = true;
    const first = waiting(s.gate.enter(req('r1')));
    s.sat.on = false;
    const second = waiting(s.gate.enter(req('r2')), 'queued, not past r1');
    await Promise.all([first, second]);
    s.gate.close();
  });

  test('a full queue and a full tenant share are 429 with Retry-After', () => {
    const s = setup({ maxQueued: 3, perTenant: 2 });
    s.sat.on = true;
    waiting(s.gate.enter(req('a1', 'a'))).catch(() => {});
    waiting(s.gate.enter(req('a2', 'a'))).catch(() => {});
    assert.throws(
      () => s.gate.enter(req('a3', 'a')),
      (err: unknown) =>
        err instanceof ApiError &&
        err.status === 429 &&
        err.param === 'flow_max_queued_per_tenant' &&
        err.retryAfterS !== null &&
        err.retryAfterS >= 1,
    );
    waiting(s.gate.enter(req('b1', 'b'))).catch(() => {});
    assert.throws(
      () => s.gate.enter(req('c1', 'c')),
      (err: unknown) =>
        err instanceof ApiError && err.status === 429 && err.param === 'flow_max_queued',
    );
    assert.equal(s.gate.size, 3);
    s.gate.close();
  });

  test('past the deadline a waiter gets 503 with Retry-After and its place is freed', async () => {
    const s = setup({ maxWaitMs: 2_000 });
    s.sat.on = true;
    const p = waiting(s.gate.enter(req('r1')));
    s.clock.ms += 1_999;
    s.gate.pump();
    assert.equal(s.gate.size, 1);
    s.clock.ms += 1;
    s.gate.pump();
    await assert.rejects(
      p,
      (err: unknown) => err instanceof ApiError && err.status === 503 && err.retryAfterS === 2,
    );
    assert.equal(s.gate.size, 0);
    const rejected = await metric(s.registry, 'kvroute_flow_rejected_total');
    assert.equal(rejected.get('pool=m,class=default,tenant=a,reason=expired'), 1);
    s.gate.close();
  });

  test('a client that leaves is removed at once and is never dispatched', async () => {
    const s = setup();
    s.sat.on = true;
    const left = new AbortController();
    const p = waiting(s.gate.enter(req('gone'), left.signal));
    const stays = waiting(s.gate.enter(req('stays')));
    left.abort();
    await assert.rejects(p, FlowCancelled);
    assert.equal(s.gate.size, 1);
    s.sat.on = false;
    s.gate.pump();
    await stays;
    const dispatched = await metric(s.registry, 'kvroute_flow_dispatched_total');
    assert.equal(
      [...dispatched.values()].reduce((a, b) => a + b, 0),
      1,
    );
    const cancelled = await metric(s.registry, 'kvroute_flow_cancelled_total');
    assert.equal(cancelled.get('pool=m,class=default,tenant=a'), 1);
    s.gate.close();
  });

  test('an already aborted signal is refused before queueing', () => {
    const s = setup();
    s.sat.on = true;
    const left = new AbortController();
    left.abort();
    assert.throws(() => s.gate.enter(req('r1'), left.signal), FlowCancelled);
    assert.equal(s.gate.size, 0);
    s.gate.close();
  });

  test('close answers every waiter 503', async () => {
    const s = setup();
    s.sat.on = true;
    const p = waiting(s.gate.enter(req('r1')));
    s.gate.close();
    await assert.rejects(p, (err: unknown) => err instanceof ApiError && err.status === 503);
  });
});

describe('PoolFlowGate with a readiness (owner release)', () => {
  test('a sparse tenant leaves with the replica its pass names while a backlogged one waits', async () => {
    const seen: { id: string; sparse: boolean }[] = [];
    const s = setup({
      readiness: (r, _waitedMs, sparse) => {
        seen.push({ id: r.id, sparse });
        return sparse ? { replica: `near-${r.id}` } : null;
      },
    });
    assert.deepEqual(s.gate.enter(req('alone', 'c')), { replica: 'near-alone' }, 'nothing queued');
    s.sat.on = true;
    const a1 = waiting(s.gate.enter(req('a1', 'a')));
    const a2 = waiting(s.gate.enter(req('a2', 'a')));
    const b1 = waiting(s.gate.enter(req('b1', 'b')));
    s.sat.on = false;
    s.gate.pump();
    assert.deepEqual(await b1, { replica: 'near-b1' });
    await turn();
    assert.equal(s.gate.size, 2, "a's two wait: a is not sparse");
    assert.ok(seen.some((v) => v.id === 'a1' && !v.sparse));
    assert.ok(seen.some((v) => v.id === 'b1' && v.sparse));
    s.gate.close();
    await assert.rejects(a1);
    await assert.rejects(a2);
  });

  for (const charged of [true, false]) {
    test(`the fair share charges the pass's tokens (${charged ? 'given' : 'not given: the prompt'})`, async () => {
      const s = setup({
        readiness: (r): FlowPass =>
          charged
            ? { replica: null, chargeTokens: r.tenant === 'a' ? 10 : 100 }
            : { replica: null },
      });
      s.sat.on = true;
      const order: string[] = [];
      const all = ['b1', 'b2', 'b3', 'a1', 'a2', 'a3'].map((id) =>
        waiting(s.gate.enter(req(id, id[0]))).then(() => order.push(id)),
      );
      s.sat.on = false;
      s.gate.pump();
      await Promise.all(all);
      const b2 = order.indexOf('b2');
      if (charged) {
        // a is charged a tenth of b's prompt per request: all of a's go before b's second.
        assert.ok(order.indexOf('a3') < b2, order.join(' '));
      } else {
        // Equal charges: the two alternate.
        assert.ok(order.indexOf('a3') > b2, order.join(' '));
      }
      s.gate.close();
    });
  }
});

describe('PoolFlowGate: a preferred pass inside a tenant (owner-pass-ms)', () => {
  // 'cold' requests are ready by their hold only; 'warm' ones have their owner's room.
  const readiness: FlowReadiness = (r) =>
    r.id.startsWith('warm')
      ? { replica: null, chargeTokens: 10, preferred: true }
      : { replica: null, chargeTokens: 100 };

  for (const [passMs, waitedMs, passes] of [
    [2_000, 1_000, true],
    [2_000, 2_000, false],
    [0, 0, false],
  ] as const) {
    test(`passMs ${passMs}, the earlier one waited ${waitedMs} ms: ${passes ? 'the warm one passes it' : 'FIFO'}`, async () => {
      const s = setup({ readiness, passMs });
      s.sat.on = true;
      const order: string[] = [];
      const charged: (number | undefined)[] = [];
      const all = ['cold1', 'warm2'].map((id) =>
        waiting(s.gate.enter(req(id))).then((p) => {
          order.push(id);
          charged.push(p.chargeTokens);
        }),
      );
      s.clock.ms += waitedMs;
      s.sat.on = false;
      s.gate.pump();
      await Promise.all(all);
      assert.deepEqual(order, passes ? ['warm2', 'cold1'] : ['cold1', 'warm2']);
      // Each resolves with its own pass (its charge), not the last one the test accepted.
      assert.deepEqual(charged, passes ? [10, 100] : [100, 10]);
      s.gate.close();
    });
  }
});

describe('replicasWithoutRoom', () => {
  const limits = { maxWaitingRequests: 5, maxKvUsage: 0.8, maxQueuedPrefillMs: 100 };
  test('names the replicas without room while another has some; none when all or none have', () => {
    const view = (loads: { waiting: number; kv: number; ms: number; eligible?: boolean }[]) => ({
      names: loads.map((_, i) => `r${i}`),
      replicas: loads.map((l) => ({
        eligible: l.eligible ?? true,
        waitingRequests: l.waiting,
        kvUsage: l.kv,
        queuedPrefillMs: l.ms,
      })),
    });
    assert.deepEqual(
      replicasWithoutRoom(
        view([
          { waiting: 6, kv: 0.1, ms: 0 },
          { waiting: 0, kv: 0.1, ms: 0 },
          { waiting: 0, kv: 0.9, ms: 0 },
          { waiting: 0, kv: 0.1, ms: 101 },
          { waiting: 0, kv: 0.1, ms: 0, eligible: false },
        ]),
        limits,
      ),
      ['r0', 'r2', 'r3', 'r4'],
    );
    assert.deepEqual(replicasWithoutRoom(view([{ waiting: 9, kv: 0, ms: 0 }]), limits), []);
    assert.deepEqual(replicasWithoutRoom(view([{ waiting: 0, kv: 0, ms: 0 }]), limits), []);
  });
  test('replicasToAvoid: every replica but the one a pass names; else those without room', () => {
    const view = {
      names: ['r0', 'r1', 'r2'],
      replicas: [0, 9, 0].map((waiting) => ({
        eligible: true,
        waitingRequests: waiting,
        kvUsage: 0,
        queuedPrefillMs: 0,
      })),
    };
    assert.deepEqual(replicasToAvoid(view, limits, 'r2'), ['r0', 'r1']);
    assert.deepEqual(replicasToAvoid(view, limits, null), ['r1']);
    assert.deepEqual(replicasToAvoid(view, limits, 'gone'), ['r1'], 'a name the pool lost');
  });
});
