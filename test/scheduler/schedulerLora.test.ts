import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EngineError } from '../../src/engine/types.ts';
import { BlockPool } from '../../src/kv/blockPool.ts';
import { Scheduler } from '../../src/scheduler/scheduler.ts';

function makeScheduler(maxLoras: number | undefined): Scheduler {
  const pool = new BlockPool({ numBlocks: 1000, blockSize: 1, enableCaching: false });
  return new Scheduler(
    {
      budgetTokens: 64,
      maxSeqs: 8,
      kvPolicy: 'reserve',
      ...(maxLoras !== undefined && { maxLoras }),
    },
    pool,
  );
}

const step = (sched: Scheduler) => {
  const plan = sched.schedule();
  sched.complete(plan);
  return plan;
};

test('max_loras 1: a request for another adapter is held back, the queue behind it still runs', () => {
  const sched = makeScheduler(1);
  sched.add({ id: 'x1', promptTokens: 4, maxNewTokens: 3, loraName: 'x' });
  assert.deepEqual(step(sched).admitted, ['x1']);
  sched.add({ id: 'y1', promptTokens: 4, maxNewTokens: 2, loraName: 'y', arrivalMs: 1 });
  sched.add({ id: 'x2', promptTokens: 4, maxNewTokens: 2, loraName: 'x', arrivalMs: 2 });
  sched.add({ id: 'base', promptTokens: 4, maxNewTokens: 2, arrivalMs: 3 });
  const plan = step(sched);
  // vLLM's rule: y1 would make two adapters run; it is skipped, x2 and the base request are not.
  assert.deepEqual(plan.admitted, ['x2', 'base']);
  assert.deepEqual(sched.waitingIds(), ['y1']);
  assert.deepEqual([...sched.loraCounts().running], [['x', 2]]);
  assert.deepEqual([...sched.loraCounts().waiting], [['y', 1]]);
  // Once no request of x runs, y1 is admitted.
  let admittedAt = -1;
  for (let i = 0; i < 10 && admittedAt < 0; i++) {
    const p = step(sched);
    if (p.admitted.includes('y1')) {
      admittedAt = i;
      assert.ok(!sched.runningIds().some((id) => id.startsWith('x')));
    }
  }
  assert.ok(admittedAt >= 0, 'y1 was admitted');
  assert.equal(sched.loraOf('y1'), 'y');
});

test('max_loras 2 lets two adapters share a step; without it adapters never hold anything back', () => {
  for (const [maxLoras, expected] of [
    [2, ['a1', 'b1', 'a2']],
    [undefined, ['a1', 'b1', 'c1', 'a2']],
  ] as const) {
    const sched = makeScheduler(maxLoras);
    ['a1:a', 'b1:b', 'c1:c', 'a2:a'].forEach((spec, i) => {
      const [id, lora] = spec.split(':') as [string, string];
      sched.add({ id, promptTokens: 4, maxNewTokens: 2, loraName: lora, arrivalMs: i });
    });
    assert.deepEqual(step(sched).admitted, expected, `max_loras ${maxLoras}`);
  }
});

test('maxLoras is validated', () => {
  assert.throws(() => makeScheduler(0), EngineError);
  assert.throws(() => makeScheduler(1.5), /maxLoras must be an integer >= 1/);
});
