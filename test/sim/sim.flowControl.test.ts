/**
 * Flow control in the simulator: a small deterministic version of the acceptance experiment
 * (bench/flowControl.ts): the light tenant's TTFT p99 is lower with flow control than without,
 * and no request is lost (served + 429 + 503 = arrivals, per tenant, in every run).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { UsageError } from '../../src/cli/args.ts';
import { parseSimFlags } from '../../src/cli/sim.ts';
import { parseTenants } from '../../src/cli/simTenantFlags.ts';
import type { FlowResult } from '../../src/results/flowTable.ts';
import {
  DEFAULT_FLOW_OWNER_PASS_MS,
  defaultFlowControl,
  type SimFlowControl,
} from '../../src/sim/flowControl.ts';
import { runFlowExperiment, tenantOf } from '../../src/sim/flowExperiment.ts';
import { type SimConfig, simulate } from '../../src/sim/run.ts';

function base(extra: string[] = []): SimConfig {
  const parsed = parseSimFlags([
    '--workload',
    'seed',
    '--replicas',
    '4',
    '--duration',
    '40',
    '--warmup',
    '8',
    '--quiet',
    ...extra,
  ]);
  assert.notEqual(parsed, 'help');
  return (parsed as Exclude<typeof parsed, 'help'>).base;
}

const TENANTS = [
  { name: 'heavy', share: 0.8, weight: 1, priorityClass: 'standard' as const },
  { name: 'light', share: 0.2, weight: 1, priorityClass: 'standard' as const },
];

function assertConserved(flow: FlowResult | undefined): void {
  assert.ok(flow !== undefined);
  for (const t of flow.tenants) {
    assert.equal(t.failed, 0, `${t.tenant}: no other failures`);
    assert.equal(t.served + t.rejected + t.expired, t.arrivals, `${t.tenant}: conservation`);
  }
}

describe('sim flow control', () => {
  test('overloaded: light waits less with flow control; every request ends served, 429 or 503', () => {
    // 4 replicas carry about 10.75 req/s of the seed (bench:flow's bisection at 8 replicas gives
    // 21.5); 16 req/s is 1.5x.
    const e = runFlowExperiment(base(), 16, TENANTS, 'light', defaultFlowControl());
    for (const run of [e.alone, e.without, e.with]) assertConserved(run.flow);
    const arrivals = (f: FlowResult) => f.tenants.map((t) => t.arrivals);
    assert.deepEqual(arrivals(e.with.flow!), arrivals(e.without.flow!), 'same tenant per arrival');
    const lightWithout = tenantOf(e.without, 'light').ttftP99Ms;
    const lightWith = tenantOf(e.with, 'light').ttftP99Ms;
    assert.ok(lightWith < lightWithout, `light p99 ${lightWith} with vs ${lightWithout} without`);
    const heavyWith = tenantOf(e.with, 'heavy');
    assert.ok(heavyWith.queueWaitP99Ms > tenantOf(e.with, 'light').queueWaitP99Ms, 'heavy waits');
    assert.equal(tenantOf(e.without, 'heavy').queueWaitP99Ms, 0, 'no queue without flow control');
  });

  test('room release, the former default, still conserves every request', () => {
    const control: SimFlowControl = { ...defaultFlowControl(), release: 'room' };
    const run = simulate({ ...base(['--rate', '16']), tenants: TENANTS, flowControl: control });
    assertConserved(run.flow);
  });

  test('finish-first and uncached charging: on by default, each can be turned off, nothing lost', () => {
    const config = (control: SimFlowControl) => ({
      ...base(['--rate', '16']),
      tenants: TENANTS,
      flowControl: control,
    });
    assert.equal(defaultFlowControl().charge, 'uncached');
    assert.equal(defaultFlowControl().sparseFinishFirst, true);
    const on = simulate(config(defaultFlowControl()));
    const off = simulate(
      config({ ...defaultFlowControl(), charge: 'prompt', sparseFinishFirst: false }),
    );
    for (const run of [on, off]) assertConserved(run.flow);
    // They change which request leaves and where it goes: the same arrivals end otherwise.
    assert.notDeepEqual(on.flow, off.flow);
    assert.deepEqual(
      simulate(config(defaultFlowControl())).flow,
      on.flow,
      'same seed, same result',
    );
  });

  test('the bounds refuse (429) and the deadline expires (503), nothing lost, same seed same result', () => {
    const control: SimFlowControl = {
      ...defaultFlowControl(),
      maxQueued: 40,
      maxQueuedPerTenant: 30,
      maxWaitMs: 2000,
    };
    const config = { ...base(['--rate', '20']), tenants: TENANTS, flowControl: control };
    const run = simulate(config);
    assertConserved(run.flow);
    const total = (k: 'rejected' | 'expired') => run.flow!.tenants.reduce((s, t) => s + t[k], 0);
    assert.ok(total('rejected') > 0, 'some refused at arrival');
    assert.ok(total('expired') > 0, 'some expired in the queue');
    assert.equal(run.errorsByKind.expired, total('expired'));
    assert.deepEqual(simulate(config).flow, run.flow);
  });
});

describe('--tenants and the flow-control flags', () => {
  test('parses shares, weights and classes', () => {
    assert.deepEqual(parseTenants('heavy:0.8,light:0.2:w=2:class=critical'), [
      { name: 'heavy', share: 0.8, weight: 1, priorityClass: 'standard' },
      { name: 'light', share: 0.2, weight: 2, priorityClass: 'critical' },
    ]);
  });

  test('bad values name the flag and what it accepts', () => {
    for (const bad of ['heavy', 'a:0', 'a:x', 'a:1:w=0', 'a:1:class=gold', 'a:1:z=1', 'a:1,a:2']) {
      assert.throws(
        () => parseTenants(bad),
        (err: Error) => {
          assert.ok(err instanceof UsageError);
          assert.match(err.message, /--tenants/);
          return true;
        },
      );
    }
    assert.throws(
      () => base(['--flow-max-wait-ms', '100']),
      /--flow-max-wait-ms needs --flow-control on/,
    );
    assert.throws(() => base(['--flow-control', 'yes']), /--flow-control must be one of on, off/);
    assert.throws(() => base(['--tenants', 'a:1', '--pd', '2:2']), /drop --pd/);
    assert.throws(() => base(['--flow-control', 'on', '--fault-lie']), /drop --fault-lie/);
    const on = base(['--flow-control', 'on', '--flow-max-queued', '7', '--tenants', 'a:1']);
    assert.equal(on.flowControl?.maxQueued, 7);
    assert.equal(on.flowControl?.release, 'owner', 'owner release by default');
    const room = base(['--flow-control', 'on', '--flow-release', 'room', '--flow-look-ahead', '3']);
    assert.equal(room.flowControl?.release, 'room');
    assert.equal(room.flowControl?.lookAhead, 3);
    assert.throws(
      () => base(['--flow-control', 'on', '--flow-release', 'near']),
      /--flow-release must be one of room, owner/,
    );
    assert.throws(
      () => base(['--flow-owner-hold-ms', '100']),
      /--flow-owner-hold-ms needs --flow-control on/,
    );
    assert.throws(
      () => base(['--flow-owner-pass-ms', '100']),
      /--flow-owner-pass-ms needs --flow-control on/,
    );
    assert.equal(on.flowControl?.ownerPassMs, DEFAULT_FLOW_OWNER_PASS_MS);
    const pass = base(['--flow-control', 'on', '--flow-owner-pass-ms', '0']);
    assert.equal(pass.flowControl?.ownerPassMs, 0);
    assert.equal(on.tenants?.[0]?.name, 'a');
  });
});
