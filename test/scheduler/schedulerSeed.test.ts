import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { EngineError } from '../../src/engine/types.ts';
import { BlockPool } from '../../src/kv/blockPool.ts';
import { Scheduler } from '../../src/scheduler/scheduler.ts';
import type { SchedulerConfig } from '../../src/scheduler/types.ts';
import { SeedScheduler } from '../support/seedScheduler.ts';

function makeScheduler(config: Partial<SchedulerConfig> & { kvTokens: number }): Scheduler {
  const pool = new BlockPool({ numBlocks: config.kvTokens, blockSize: 1, enableCaching: false });
  return new Scheduler({ budgetTokens: 8, maxSeqs: 8, kvPolicy: 'reserve', ...config }, pool);
}

const entries = (plan: { entries: { id: string; tokens: number }[] }): [string, number][] =>
  plan.entries.map((e) => [e.id, e.tokens]);

test('an empty scheduler returns an empty plan', () => {
  const sched = makeScheduler({ kvTokens: 100 });
  const plan = sched.schedule();
  assert.deepEqual(plan.entries, []);
  assert.equal(plan.prefillTokens + plan.decodeTokens, 0);
  assert.deepEqual(sched.complete(plan), { emitted: [], finished: [] });
  assert.equal(sched.hasWork(), false);
});

test('hand trace: budget 8, one decode running, a 20-token prompt gets chunks 7, 7, 6', () => {
  const sched = makeScheduler({ kvTokens: 1000 });
  sched.add({ id: 'a', promptTokens: 4, maxNewTokens: 100 });
  const first = sched.schedule();
  assert.deepEqual(entries(first), [['a', 4]]);
  assert.deepEqual(sched.complete(first).emitted, [{ id: 'a', index: 0, handle: -1 }]);

  sched.add({ id: 'b', promptTokens: 20, maxNewTokens: 5 });
  const chunks: number[] = [];
  let firstTokenStep = -1;
  for (let step = 1; step <= 3; step++) {
    const plan = sched.schedule();
    assert.deepEqual(plan.entries[0], {
      id: 'a',
      kind: 'decode',
      tokens: 1,
      contextTokens: 3 + step,
    });
    const b = plan.entries.find((e) => e.id === 'b')!;
    assert.equal(b.kind, 'prefill');
    chunks.push(b.tokens);
    const { emitted } = sched.complete(plan);
    if (emitted.some((e) => e.id === 'b' && e.index === 0)) firstTokenStep = step;
  }
  assert.deepEqual(chunks, [7, 7, 6]);
  assert.equal(firstTokenStep, 3);
});

test('a request with maxNew = 1 leaves on the step its prompt finishes', () => {
  const sched = makeScheduler({ kvTokens: 100 });
  sched.add({ id: 'a', promptTokens: 12, maxNewTokens: 1 });
  const p1 = sched.schedule();
  assert.deepEqual(sched.complete(p1), { emitted: [], finished: [] });
  const p2 = sched.schedule();
  const out = sched.complete(p2);
  assert.deepEqual(out.emitted, [{ id: 'a', index: 0, handle: -1 }]);
  // Its second chunk started with 8 tokens computed: SGLang would log them as cached.
  assert.deepEqual(out.finished, [
    {
      id: 'a',
      promptTokens: 12,
      cachedTokens: 0,
      outputTokens: 1,
      reason: 'length',
      resumedPrefixTokens: 8,
    },
  ]);
  assert.equal(sched.hasWork(), false);
});

test('steps to the first token of a 32,768-token prompt with 64 decodes: 17 at 2,048, 5 at 8,192', () => {
  for (const [budgetTokens, expected] of [
    [2048, 17],
    [8192, 5],
  ] as const) {
    const sched = makeScheduler({ kvTokens: 1_000_000, budgetTokens, maxSeqs: 128 });
    for (let i = 0; i < 64; i++) sched.add({ id: `d${i}`, promptTokens: 1, maxNewTokens: 1000 });
    sched.complete(sched.schedule()); // all 64 prefill their one token and start decoding
    sched.add({ id: 'long', promptTokens: 32_768, maxNewTokens: 10 });
    let steps = 0;
    for (;;) {
      steps++;
      const plan = sched.schedule();
      assert.equal(plan.decodeTokens, 64);
      if (sched.complete(plan).emitted.some((e) => e.id === 'long')) break;
    }
    assert.equal(steps, expected, `budget ${budgetTokens}`);
  }
});

test('a request that can never fit is rejected at add, with the numbers', () => {
  const sched = makeScheduler({ kvTokens: 100 });
  assert.throws(
    () => sched.add({ id: 'big', promptTokens: 90, maxNewTokens: 20 }),
    (err: unknown) =>
      err instanceof EngineError &&
      err.code === 'ERR_NEVER_FITS' &&
      /90 prompt \+ 20 new tokens/.test(err.message) &&
      /100 blocks/.test(err.message),
  );
  sched.add({ id: 'fits', promptTokens: 80, maxNewTokens: 20 });
  assert.throws(
    () => sched.add({ id: 'fits', promptTokens: 1, maxNewTokens: 1 }),
    (err: unknown) => err instanceof EngineError && err.code === 'ERR_DUPLICATE_ID',
  );
  for (const bad of [
    { promptTokens: 0, maxNewTokens: 1 },
    { promptTokens: 3, maxNewTokens: 0 },
    { promptTokens: 2.5, maxNewTokens: 1 },
  ]) {
    assert.throws(
      () => sched.add({ id: 'x', ...bad }),
      (err: unknown) => err instanceof EngineError && err.code === 'ERR_INVALID_REQUEST',
    );
  }
});

test('config is validated with ERR_CONFIG', () => {
  const isConfigError = (err: unknown) => err instanceof EngineError && err.code === 'ERR_CONFIG';
  const pool = new BlockPool({ numBlocks: 10, blockSize: 4 });
  const base: SchedulerConfig = { budgetTokens: 8, maxSeqs: 4, kvPolicy: 'paged' };
  for (const bad of [
    { budgetTokens: 0 },
    { budgetTokens: 1.5 },
    { maxSeqs: 0 },
    { kvPolicy: 'lru' as never },
    { watermark: 1 },
    { watermark: -0.1 },
    { maxPartialPrefills: 0 },
    { longPrefillThreshold: -3 },
    { priorityAgeMs: Number.NaN },
    { alignChunksToBlocks: true, budgetTokens: 3 },
  ]) {
    assert.throws(
      () => new Scheduler({ ...base, ...bad }, pool),
      isConfigError,
      JSON.stringify(bad),
    );
  }
});

test('reserve mode with block size 1 and no prefix cache plans exactly as the seed reference', () => {
  const request = fc.record({
    promptLen: fc.integer({ min: 1, max: 60 }),
    maxNew: fc.integer({ min: 1, max: 12 }),
    arrivalGap: fc.integer({ min: 0, max: 6 }),
  });
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 64 }),
      fc.integer({ min: 1, max: 8 }),
      fc.integer({ min: 0, max: 80 }),
      fc.array(request, { minLength: 1, maxLength: 14 }),
      (budget, maxSeqs, extraKv, reqs) => {
        const kvTokens = Math.max(...reqs.map((r) => r.promptLen + r.maxNew)) + extraKv;
        const oracle = new SeedScheduler(budget, maxSeqs, kvTokens);
        const sched = makeScheduler({ kvTokens, budgetTokens: budget, maxSeqs });
        let arrival = 0;
        const arrivals = reqs.map((r, i) => ({ ...r, id: `r${i}`, at: (arrival += r.arrivalGap) }));
        let next = 0;
        for (let step = 0; step < 10_000; step++) {
          while (next < arrivals.length && arrivals[next]!.at <= step) {
            const r = arrivals[next++]!;
            oracle.add(r.id, r.promptLen, r.maxNew);
            sched.add({ id: r.id, promptTokens: r.promptLen, maxNewTokens: r.maxNew });
          }
          const want = oracle.schedule();
          const plan = sched.schedule();
          assert.deepEqual(
            entries(plan),
            want.map(([r, n]) => [r.rid, n]),
            `step ${step}`,
          );
          const emittedWant = oracle.complete(want);
          const emitted = sched.complete(plan).emitted.map((e) => e.id);
          assert.deepEqual(emitted, emittedWant);
          if (next === arrivals.length && !sched.hasWork()) {
            assert.equal(oracle.running.length + oracle.waiting.length, 0);
            assert.equal(oracle.kvFree, kvTokens);
            return;
          }
        }
        assert.fail('did not finish');
      },
    ),
    { numRuns: 3000 },
  );
});
