/**
 * The scheduler's SGLang modes, each against the SGLang source it follows (v0.4 series):
 * - `batchShape: 'prefill-first'`: `get_next_batch_to_run` ("Run prefill first if possible",
 *   else the running batch decodes), python/sglang/srt/managers/scheduler.py, with
 *   `enable_mixed_chunk` False (server_args.py);
 * - `deferPrefixInsert`: `event_loop_overlap` forms batch k+1 before `process_batch_result`
 *   of batch k runs `cache_unfinished_req`, while the being-chunked request is cached at the top
 *   of `get_next_batch_to_run`, before the next batch is formed (scheduler.py);
 * - `schedulePolicy: 'lpm'`: `SchedulePolicy.calc_priority` sorts the waiting list by matched
 *   prefix, longest first (a stable sort), unless it holds more than 128 requests
 *   (python/sglang/srt/managers/schedule_policy.py).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { batchDefaults } from '../../src/engine/engineDefaults.ts';
import { computeBlockKeys } from '../../src/kv/blockKey.ts';
import { BlockPool } from '../../src/kv/blockPool.ts';
import { gpuByName as getGpu, modelByName as getModel } from '../../src/model/catalog.ts';
import { LPM_MAX_QUEUE } from '../../src/scheduler/config.ts';
import { listQueue } from '../../src/scheduler/waitQueue.ts';
import { Scheduler } from '../../src/scheduler/scheduler.ts';
import { Seq } from '../../src/scheduler/seq.ts';
import type { SchedRequest, SchedulerConfig, SeqFinished } from '../../src/scheduler/types.ts';
import { Rng } from '../../src/util/rng.ts';
import { makeRequests } from '../support/schedulerHarness.ts';

const BLOCK = 4;

function makeScheduler(config: Partial<SchedulerConfig>, caching = false): Scheduler {
  const pool = new BlockPool({ numBlocks: 10_000, blockSize: BLOCK, enableCaching: caching });
  return new Scheduler({ budgetTokens: 8, maxSeqs: 1000, kvPolicy: 'paged', ...config }, pool);
}

/** A request whose prompt is `tokens`, with its block keys for the prefix cache. */
function req(id: string, tokens: number[], maxNewTokens = 2): SchedRequest {
  return {
    id,
    promptTokens: tokens.length,
    maxNewTokens,
    tokenIds: tokens,
    blockKeys: computeBlockKeys(tokens, BLOCK),
  };
}

const SHARED = [1, 2, 3, 4, 5, 6, 7, 8]; // two blocks
const withTail = (tail: number) => [...SHARED, tail];

/** Steps until idle; each step's entries as [id, kind, tokens], and every finished record. */
function drain(sched: Scheduler, maxSteps = 200) {
  const steps: [string, string, number][][] = [];
  const finished = new Map<string, SeqFinished>();
  for (let i = 0; i < maxSteps && sched.hasWork(); i++) {
    const plan = sched.schedule();
    steps.push(plan.entries.map((e) => [e.id, e.kind, e.tokens]));
    for (const f of sched.complete(plan).finished) finished.set(f.id, f);
  }
  assert.equal(sched.hasWork(), false, 'drained');
  return { steps, finished };
}

describe('prefill first: prefill and decode batches apart (SGLang without mixed chunk)', () => {
  const run = (batchShape: 'mixed' | 'prefill-first') => {
    const sched = makeScheduler({ batchShape });
    sched.add({ id: 'a', promptTokens: 4, maxNewTokens: 3 });
    const first = sched.schedule();
    sched.complete(first);
    // b arrives while a decodes; 12 tokens take two prefill chunks of the 8-token budget.
    sched.add({ id: 'b', promptTokens: 12, maxNewTokens: 2 });
    return drain(sched).steps;
  };

  test('a step is a prefill batch while one can be formed; decodes wait for it', () => {
    assert.deepEqual(run('prefill-first'), [
      [['b', 'prefill', 8]],
      [['b', 'prefill', 4]],
      [
        ['a', 'decode', 1],
        ['b', 'decode', 1],
      ],
      [['a', 'decode', 1]],
    ]);
  });

  test('mixed (the default) puts the decode and the chunk in one step', () => {
    assert.deepEqual(run('mixed'), [
      [
        ['a', 'decode', 1],
        ['b', 'prefill', 7],
      ],
      [
        ['a', 'decode', 1],
        ['b', 'prefill', 5],
      ],
      [['b', 'decode', 1]],
    ]);
  });
});

describe("the overlap scheduler's one-batch delay before a prompt enters the cache", () => {
  const cachedOf = (deferPrefixInsert: boolean) => {
    // A budget of 9 tokens: one 9-token prompt a step, a, then b, then c.
    const sched = makeScheduler(
      { budgetTokens: 9, batchShape: 'prefill-first', deferPrefixInsert },
      true,
    );
    for (const [id, tail] of [
      ['a', 100],
      ['b', 101],
      ['c', 102],
    ] as const) {
      sched.add(req(id, withTail(tail)));
    }
    const { finished } = drain(sched);
    return ['a', 'b', 'c'].map((id) => finished.get(id)!.cachedTokens);
  };

  test("a prompt prefilled in step k is matched from step k+2: b misses a's prefix, c finds it", () => {
    assert.deepEqual(cachedOf(true), [0, 0, 8]);
  });

  test('without the delay b already finds it', () => {
    assert.deepEqual(cachedOf(false), [0, 8, 8]);
  });

  test('a chunk that leaves its prompt unfinished is cached before the next plan', () => {
    // a: 12 tokens in chunks of 8 and 4; b arrives after a's first chunk and is admitted beside
    // its second: it finds a's first two blocks at once, as SGLang caches the being-chunked
    // request at the top of get_next_batch_to_run.
    const sched = makeScheduler(
      { budgetTokens: 8, batchShape: 'prefill-first', deferPrefixInsert: true },
      true,
    );
    sched.add(req('a', [...SHARED, 20, 21, 22, 23]));
    sched.complete(sched.schedule());
    sched.add(req('b', withTail(101)));
    const second = sched.schedule();
    assert.deepEqual(second.admitted, ['b']);
    assert.equal(sched.cachedTokensOf('b'), 8);
    sched.complete(second);
    drain(sched);
  });

  test('a prompt still waiting to be cached is cached when its request ends', () => {
    // maxNewTokens 1: a finishes in the step its prefill ends, before the next plan.
    const sched = makeScheduler(
      { budgetTokens: 9, batchShape: 'prefill-first', deferPrefixInsert: true },
      true,
    );
    sched.add(req('a', withTail(100), 1));
    sched.complete(sched.schedule());
    sched.add(req('b', withTail(101), 1));
    sched.complete(sched.schedule());
    assert.equal(sched.hasWork(), false);
    sched.add(req('c', withTail(102), 1));
    const { finished } = drain(sched);
    assert.equal(finished.get('c')!.cachedTokens, 8);
  });
});

describe('LPM: the waiting list sorted by cached prefix before each prefill batch', () => {
  /** a cached first, then `waiting` uncached prompts and y (a's prefix) behind them. */
  const admittedFirst = (schedulePolicy: 'fcfs' | 'lpm', waiting: number) => {
    const sched = makeScheduler(
      { budgetTokens: 9, batchShape: 'prefill-first', schedulePolicy },
      true,
    );
    sched.add(req('a', withTail(100), 1));
    sched.complete(sched.schedule());
    for (let i = 0; i < waiting; i++) sched.add(req(`x${i}`, [50 + i, 9, 9, 9, 9, 9, 9, 9, 9]));
    sched.add(req('y', withTail(101)));
    const plan = sched.schedule();
    const order = sched.waitingIds();
    sched.complete(plan);
    return { admitted: plan.admitted, order };
  };

  test('the request with the longest cached prefix goes first; ties keep their order', () => {
    const { admitted, order } = admittedFirst('lpm', 3);
    // y needs 1 token, then x0 gets the 8 left as its first chunk.
    assert.deepEqual(admitted, ['y', 'x0']);
    // Sorted in place, as Python's list.sort: the uncached keep their arrival order.
    assert.deepEqual(order, ['x1', 'x2']);
  });

  test('fcfs keeps the arrival order', () => {
    assert.deepEqual(admittedFirst('fcfs', 3).admitted, ['x0']);
  });

  test(`above ${LPM_MAX_QUEUE} waiting requests LPM leaves the list as it is`, () => {
    // LPM_MAX_QUEUE requests in all (y included): sorted; one more: first come first served.
    assert.deepEqual(admittedFirst('lpm', LPM_MAX_QUEUE - 1).admitted, ['y', 'x0']);
    assert.deepEqual(admittedFirst('lpm', LPM_MAX_QUEUE).admitted, ['x0']);
  });

  test("SGLang's list: requests go to the back, a sort is stable", () => {
    const q = listQueue();
    const seqs = ['p', 'q', 'r'].map(
      (id, i) => new Seq({ id, promptTokens: 1, maxNewTokens: 1, priority: -i }, i, 10_000),
    );
    for (const seq of seqs) q.insert(seq); // priorities are not an order here
    assert.deepEqual(
      q.toArray().map((s) => s.id),
      ['p', 'q', 'r'],
    );
    q.sortByKeys([0, -1, 0]);
    assert.deepEqual(
      q.toArray().map((s) => s.id),
      ['q', 'p', 'r'],
    );
    q.shift();
    q.unshift(seqs[2]!);
    assert.deepEqual(
      q.toArray().map((s) => s.id),
      ['r', 'p', 'r'],
    );
  });
});

describe('the SGLang engine defaults carry its scheduler', () => {
  const model = getModel('llama-3.1-8b');
  test('sglang-v0.4: chunked prefill 8192 on an A100 80 GB, 2048 under 25,000 MB; lpm', () => {
    const a100 = batchDefaults('sglang-v0.4', getGpu('a100-80gb'), model, 414_581);
    assert.deepEqual(a100, {
      budgetTokens: 8192,
      maxSeqs: 2048,
      scheduling: { batchShape: 'prefill-first', schedulePolicy: 'lpm', deferPrefixInsert: true },
    });
    assert.equal(batchDefaults('sglang-v0.4', getGpu('l4'), model, 100_000).budgetTokens, 2048);
  });

  test("sglang (today's): fcfs; kvroute and vllm keep vLLM's step", () => {
    const gpu = getGpu('a100-80gb');
    assert.equal(batchDefaults('sglang', gpu, model, 414_581).scheduling?.schedulePolicy, 'fcfs');
    assert.equal(batchDefaults('vllm', gpu, model, 414_581).scheduling, undefined);
    assert.equal(batchDefaults('kvroute', gpu, model, 414_581).scheduling, undefined);
  });
});

describe('SGLang modes under random load (fast-check)', () => {
  /**
   * Random arrivals with shared prefixes on a pool from barely enough to generous (so paged
   * preemption happens), some aborted: every request ends with all its tokens, in order; a
   * prefill-first step never mixes prefill and decode; every block comes back; same seed, same
   * plans.
   */
  const runOnce = (p: {
    seed: number;
    budget: number;
    slack: number;
    batchShape: 'mixed' | 'prefill-first';
    schedulePolicy: 'fcfs' | 'lpm' | undefined;
    deferPrefixInsert: boolean;
    aborts: boolean;
  }) => {
    const rng = new Rng(p.seed);
    const requests = makeRequests(rng, 25, {
      maxPrompt: 120,
      maxNew: 20,
      priorities: 1,
      withTokens: true,
    });
    const largest = Math.max(
      ...requests.map((r) => Math.ceil((r.promptTokens + r.maxNewTokens) / BLOCK)),
    );
    const numBlocks = largest + 2 + Math.floor(p.slack * largest * 6);
    const pool = new BlockPool({ numBlocks, blockSize: BLOCK, enableCaching: true });
    const sched = new Scheduler(
      {
        budgetTokens: p.budget,
        maxSeqs: 8,
        kvPolicy: 'paged',
        batchShape: p.batchShape,
        deferPrefixInsert: p.deferPrefixInsert,
        ...(p.schedulePolicy && { schedulePolicy: p.schedulePolicy }),
      },
      pool,
    );
    const emitted = new Map<string, number>();
    const done = new Set<string>();
    const trace: string[] = [];
    let preemptions = 0;
    let next = 0;
    for (let step = 0; step < 100_000; step++) {
      while (next < requests.length && requests[next]!.arrivalStep <= step) {
        const r = requests[next++]!;
        sched.add({
          id: r.id,
          promptTokens: r.promptTokens,
          maxNewTokens: r.maxNewTokens,
          tokenIds: r.tokenIds!,
          blockKeys: computeBlockKeys(r.tokenIds!, BLOCK),
        });
        emitted.set(r.id, 0);
      }
      if (p.aborts && step % 7 === 3) {
        const id = requests[rng.int(next || 1)]?.id;
        if (id !== undefined && !done.has(id) && sched.abort(id) !== null) done.add(id);
      }
      if (!sched.hasWork()) {
        if (next >= requests.length) break;
        continue;
      }
      const plan = sched.schedule();
      preemptions += plan.preempted.length;
      const kinds = new Set(plan.entries.map((e) => e.kind));
      if (p.batchShape === 'prefill-first') assert.ok(kinds.size <= 1, 'prefill and decode apart');
      assert.ok(plan.prefillTokens + plan.decodeTokens <= p.budget);
      trace.push(plan.entries.map((e) => `${e.id}:${e.kind}:${e.tokens}`).join(','));
      const out = sched.complete(plan);
      for (const t of out.emitted) {
        assert.equal(t.index, emitted.get(t.id), `${t.id}: tokens in order`);
        emitted.set(t.id, t.index + 1);
      }
      for (const f of out.finished) {
        assert.equal(f.outputTokens, requests.find((r) => r.id === f.id)!.maxNewTokens);
        done.add(f.id);
      }
    }
    assert.equal(sched.hasWork(), false, 'drained');
    assert.equal(done.size, requests.length, 'every request ended');
    assert.equal(pool.freeBlocks, pool.numBlocks, 'every block back');
    return { trace: trace.join('|'), preemptions };
  };

  test('300 random runs keep the invariants, preemptions included', () => {
    let preemptions = 0;
    fc.assert(
      fc.property(
        fc.record({
          seed: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
          budget: fc.integer({ min: 1, max: 200 }),
          slack: fc.oneof(fc.constant(0), fc.double({ min: 0, max: 1, noNaN: true })),
          batchShape: fc.constantFrom('mixed' as const, 'prefill-first' as const),
          schedulePolicy: fc.constantFrom(undefined, 'fcfs' as const, 'lpm' as const),
          deferPrefixInsert: fc.boolean(),
          aborts: fc.boolean(),
        }),
        (p) => {
          const a = runOnce(p);
          preemptions += a.preemptions;
          if (p.seed % 8 === 0) assert.equal(runOnce(p).trace, a.trace, 'same seed, same plans');
        },
      ),
      { numRuns: 300 },
    );
    assert.ok(preemptions > 20, `preemptions happened (${preemptions})`);
  });
});
