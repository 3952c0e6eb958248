import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { EngineCore } from '../../src/engine/core.ts';
import { type EngineConfig, EngineError, type StepResult } from '../../src/engine/types.ts';
import { computeBlockKeys } from '../../src/kv/blockKey.ts';
import { makeReplicaSpec } from '../../src/model/index.ts';
import { Rng } from '../../src/util/rng.ts';
import { applyEvents } from '../support/schedulerHarness.ts';

const spec = makeReplicaSpec();

function makeEngine(overrides: Partial<EngineConfig> = {}): EngineCore {
  return new EngineCore({
    spec,
    budgetTokens: 8192,
    maxSeqs: 64,
    kvPolicy: 'paged',
    blockSize: 16,
    kvBlocks: 2000,
    ...overrides,
  });
}

const range = (n: number, start = 0) => Array.from({ length: n }, (_, i) => start + i);

/** Steps until idle; returns every step's result. */
function drain(engine: EngineCore, maxSteps = 100_000): StepResult[] {
  const results: StepResult[] = [];
  while (engine.hasWork()) {
    results.push(engine.step());
    assert.ok(results.length < maxSteps, 'engine does not go idle');
  }
  return results;
}

const prefillOf = (results: StepResult[], id: string) =>
  results
    .flatMap((r) => (r.plan as { entries: { id: string; kind: string; tokens: number }[] }).entries)
    .filter((e) => e.id === id && e.kind === 'prefill')
    .reduce((sum, e) => sum + e.tokens, 0);

for (const kvPolicy of ['reserve', 'paged'] as const) {
  test(`${kvPolicy}: two requests sharing 6,000 of 8,000 tokens: the second prefills 2,000`, () => {
    const engine = makeEngine({ kvPolicy });
    const a = range(8000);
    const b = [...a.slice(0, 6000), ...range(2000, 50_000)];
    engine.add({ id: 'a', promptTokens: a, maxNewTokens: 4, arrivalMs: 0 });
    const first = drain(engine);
    assert.equal(prefillOf(first, 'a'), 8000);
    engine.add({ id: 'b', promptTokens: b, maxNewTokens: 4, arrivalMs: 1 });
    const second = drain(engine);
    assert.equal(prefillOf(second, 'b'), 2000);
    const done = second.flatMap((r) => r.finished);
    assert.deepEqual(done, [
      { id: 'b', promptTokens: 8000, cachedTokens: 6000, outputTokens: 4, reason: 'length' },
    ]);
    // The same prompt again: every block is cached, but one token must be computed, so the
    // last block (16 tokens) is recomputed.
    engine.add({ id: 'a2', promptTokens: a, maxNewTokens: 1, arrivalMs: 2 });
    const third = drain(engine);
    assert.equal(prefillOf(third, 'a2'), 16);
    assert.equal(third.flatMap((r) => r.finished)[0]!.cachedTokens, 7984);
    const c = engine.counters();
    assert.equal(c.prefixCacheQueriesTokens, 24_000);
    assert.equal(c.prefixCacheHitsTokens, 6000 + 7984);
    assert.equal(c.promptTokens, 24_000);
    assert.equal(c.generationTokens, 9);
  });
}

test('eviction is LRU and takes a finished request tail first', () => {
  const engine = makeEngine({ kvBlocks: 7, budgetTokens: 256, watermark: 0 });
  const a = range(72); // 4 full blocks and 8 tokens: 5 blocks
  const keys = computeBlockKeys(a, 16);
  engine.add({ id: 'a', promptTokens: a, maxNewTokens: 1, arrivalMs: 0 });
  const events = drain(engine).flatMap((r) => r.events);
  assert.deepEqual(
    events.map((e) => e.type),
    ['BlockStored'],
  );
  // 56 tokens need 4 blocks: A's uncached block, the 2 never used, then A's last full block.
  engine.add({ id: 'c', promptTokens: range(56, 1000), maxNewTokens: 1, arrivalMs: 1 });
  const removed = drain(engine)
    .flatMap((r) => r.events)
    .filter((e) => e.type === 'BlockRemoved');
  assert.deepEqual(removed, [{ type: 'BlockRemoved', blockKeys: [keys[3]] }]);
  engine.add({ id: 'a', promptTokens: a, maxNewTokens: 1, arrivalMs: 2 });
  engine.step();
  assert.equal(engine.counters().prefixCacheHitsTokens, 48);
});

test('cache_salt separates otherwise equal prompts', () => {
  const engine = makeEngine();
  const prompt = range(640);
  const run = (id: string, cacheSalt?: string) => {
    engine.add({
      id,
      promptTokens: prompt,
      maxNewTokens: 2,
      arrivalMs: 0,
      ...(cacheSalt && { cacheSalt }),
    });
    return drain(engine).flatMap((r) => r.finished)[0]!.cachedTokens;
  };
  assert.equal(run('plain'), 0);
  assert.equal(run('salted', 'tenant-a'), 0);
  assert.equal(run('other-salt', 'tenant-b'), 0);
  assert.equal(run('salted-again', 'tenant-a'), 624);
  assert.equal(run('plain-again'), 624);
  engine.add({ id: 'lora', promptTokens: prompt, maxNewTokens: 1, arrivalMs: 0, loraName: 'x' });
  assert.equal(drain(engine).flatMap((r) => r.finished)[0]!.cachedTokens, 0);
});

test('events replayed into a set match what the cache holds, after every step', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 1e9 }),
      fc.constantFrom('reserve', 'paged'),
      (seed, kvPolicy) => {
        const rng = new Rng(seed);
        const engine = makeEngine({
          kvPolicy,
          kvBlocks: rng.range(40, 200),
          budgetTokens: rng.range(16, 512),
          maxSeqs: rng.range(1, 8),
        });
        const bases = [0, 1, 2].map((b) => range(400, b * 10_000));
        const replayed = new Set<number>();
        for (let i = 0; i < 40; i++) {
          const base = rng.pick(bases);
          const shared = rng.int(400);
          const prompt = [
            ...base.slice(0, shared),
            ...range(rng.range(1, 200), 100_000 + i * 1000),
          ];
          engine.add({
            id: `r${i}`,
            promptTokens: prompt,
            maxNewTokens: rng.range(1, 20),
            arrivalMs: i,
            ...(rng.int(6) === 0 && { cacheSalt: 's' }),
          });
          for (let s = rng.int(6); s > 0 && engine.hasWork(); s--) {
            applyEvents(replayed, engine.step().events);
            assert.deepEqual(new Set(engine.cachedBlockKeys()), replayed);
          }
        }
        for (const r of drain(engine)) applyEvents(replayed, r.events);
        assert.deepEqual(new Set(engine.cachedBlockKeys()), replayed);
        assert.equal(engine.counters().kvBlocksFree, engine.counters().kvBlocksTotal);
        assert.equal(engine.reset(), true);
        applyEvents(replayed, engine.takeEvents());
        assert.equal(replayed.size, 0);
      },
    ),
    { numRuns: 60 },
  );
});

test('paged preemption: the most recent request is recomputed from prompt + generated tokens', () => {
  const engine = makeEngine({
    kvBlocks: 10,
    blockSize: 1,
    watermark: 0,
    budgetTokens: 100,
    prefixCaching: false,
  });
  engine.add({ id: 'a', promptTokens: range(4), maxNewTokens: 5, arrivalMs: 0 });
  engine.add({ id: 'b', promptTokens: range(4, 10), maxNewTokens: 5, arrivalMs: 1 });
  const results = drain(engine);
  const preempted = results.flatMap((r) => r.preempted);
  assert.deepEqual(preempted, ['b']);
  const at = results.findIndex((r) => r.preempted.length > 0);
  assert.equal(
    results[at]!.plan && (results[at]!.plan as { admitted: string[] }).admitted.length,
    0,
  );
  // b had emitted tokens 0 and 1; it re-prefills its 4 prompt tokens and those 2.
  const before = results.slice(0, at + 1).flatMap((r) => r.emitted.filter((e) => e.id === 'b'));
  assert.deepEqual(
    before.map((e) => e.index),
    [0, 1],
  );
  assert.equal(prefillOf(results.slice(at + 1), 'b'), 6);
  // Every output index comes out exactly once: the first token is never emitted again.
  const indexes = results.flatMap((r) => r.emitted.filter((e) => e.id === 'b').map((e) => e.index));
  assert.deepEqual(indexes, [0, 1, 2, 3, 4]);
  const counters = engine.counters();
  assert.equal(counters.preemptions, 1);
  assert.equal(counters.generationTokens, 10);
  assert.equal(counters.promptTokens, 8);
  assert.equal(counters.kvBlocksFree, 10);
});

test("a request's handle comes back with each of its tokens, preempted or not; -1 without one", () => {
  const engine = makeEngine({ kvBlocks: 10, blockSize: 1, watermark: 0, budgetTokens: 100 });
  engine.add({ id: 'a', promptTokens: range(4), maxNewTokens: 5, arrivalMs: 0, handle: 7 });
  engine.add({ id: 'b', promptTokens: range(4, 10), maxNewTokens: 5, arrivalMs: 1, handle: 0 });
  engine.add({ id: 'c', promptTokens: range(2, 20), maxNewTokens: 2, arrivalMs: 2 });
  const results = drain(engine);
  assert.ok(
    results.some((r) => r.preempted.length > 0),
    'the pool is small enough to preempt',
  );
  const tokens = results.flatMap((r) => r.emitted);
  assert.equal(tokens.length, 12);
  const want = { a: 7, b: 0, c: -1 } as Record<string, number>;
  for (const t of tokens) assert.equal(t.handle, want[t.id], `${t.id} token ${t.index}`);
});

test('prefetchRunning changes no step (a property over random requests on a small pool)', () => {
  fc.assert(
    fc.property(
      fc.array(
        fc.record({
          prompt: fc.integer({ min: 1, max: 90 }),
          shared: fc.integer({ min: 0, max: 60 }),
          out: fc.integer({ min: 1, max: 12 }),
        }),
        { minLength: 1, maxLength: 24 },
      ),
      fc.constantFrom<'paged' | 'reserve'>('paged', 'reserve'),
      (requests, kvPolicy) => {
        const runOnce = (prefetchRunning: boolean) => {
          const engine = makeEngine({
            kvPolicy,
            kvBlocks: 40,
            blockSize: 4,
            budgetTokens: 48,
            maxSeqs: 8,
            prefetchRunning,
          });
          requests.forEach((r, i) => {
            const prompt = [
              ...range(Math.min(r.shared, r.prompt)),
              ...range(r.prompt, 1000 * (i + 1)),
            ];
            engine.add({
              id: `r${i}`,
              promptTokens: prompt.slice(0, r.prompt),
              maxNewTokens: r.out,
              arrivalMs: i,
              handle: i,
            });
          });
          return drain(engine, 10_000);
        };
        assert.deepEqual(runOnce(true), runOnce(false));
      },
    ),
    { numRuns: 60 },
  );
});

test('step time is the cost model of the plan; an idle step takes no time', () => {
  const engine = makeEngine();
  const idle = engine.step();
  assert.equal(idle.durationMs, 0);
  assert.deepEqual(idle.emitted, []);
  engine.add({ id: 'a', promptTokens: range(100), maxNewTokens: 3, arrivalMs: 0 });
  engine.add({ id: 'b', promptTokens: range(300, 5000), maxNewTokens: 3, arrivalMs: 0 });
  // The seed replica (Llama 3.3 70B, FP8 weights, TP=2 H200): a step takes the slower of its
  // compute at 50 % MFU and its HBM reads at 75 % MBU.
  const first = engine.step();
  assert.equal(first.prefillTokens, 400);
  // Compute-bound: 400 x 2 x 70.55e9 FLOP / (2 x 1979e12 FLOP/s x 0.50) = 28.519 ms (71.3 us a
  // token), above the weights' read, 70.55e9 B / (2 x 4.8e12 B/s x 0.75) = 9.799 ms.
  const prefillMs = ((400 * 2 * 70.55e9) / (2 * 1979e12 * 0.5)) * 1e3;
  assert.ok(Math.abs(first.durationMs - prefillMs) < 1e-9, `${first.durationMs} vs ${prefillMs}`);
  assert.ok(Math.abs(first.durationMs - 28.519) < 1e-3);
  const second = engine.step();
  assert.equal(second.decodeTokens, 2);
  // Memory-bound: the weights plus the KV of 101 + 301 tokens at 327,680 B each.
  const decodeMs = ((70.55e9 + (101 + 301) * 327_680) / (2 * 4.8e12 * 0.75)) * 1e3;
  assert.ok(Math.abs(second.durationMs - decodeMs) < 1e-9, `${second.durationMs} vs ${decodeMs}`);
  assert.ok(Math.abs(second.durationMs - 9.817) < 1e-3);
});

test('abort frees KV at once and shows up in the next step as finished', () => {
  const engine = makeEngine({ budgetTokens: 64 });
  engine.add({ id: 'a', promptTokens: range(100), maxNewTokens: 3, arrivalMs: 0 });
  engine.add({ id: 'w', promptTokens: range(100), maxNewTokens: 3, arrivalMs: 0 });
  engine.step();
  assert.ok(engine.counters().kvBlocksFree < 2000);
  assert.equal(engine.cachedTokensOf('a'), 0);
  assert.equal(engine.abort('a'), true);
  assert.equal(engine.abort('w'), true);
  assert.equal(engine.abort('nope'), false);
  assert.equal(engine.counters().kvBlocksFree, 2000);
  assert.equal(engine.hasWork(), false);
  assert.deepEqual(engine.step().finished, [
    { id: 'a', promptTokens: 100, cachedTokens: 0, outputTokens: 0, reason: 'abort' },
    { id: 'w', promptTokens: 100, cachedTokens: 0, outputTokens: 0, reason: 'abort' },
  ]);
  engine.add({ id: 'a', promptTokens: range(10), maxNewTokens: 1, arrivalMs: 1 });
  assert.equal(drain(engine).length, 1);
});

test('reset clears the prefix cache only when idle', () => {
  const engine = makeEngine();
  engine.add({ id: 'a', promptTokens: range(64), maxNewTokens: 2, arrivalMs: 0 });
  engine.step();
  assert.equal(engine.reset(), false);
  drain(engine);
  assert.ok(engine.cachedBlockKeys().length > 0);
  assert.equal(engine.reset(), true);
  assert.deepEqual(engine.takeEvents(), [{ type: 'AllBlocksCleared' }]);
  assert.deepEqual(engine.cachedBlockKeys(), []);
});

test('counters: running, waiting, KV usage', () => {
  const engine = makeEngine({ maxSeqs: 1, kvBlocks: 100 });
  engine.add({ id: 'a', promptTokens: range(160), maxNewTokens: 5, arrivalMs: 0 });
  engine.add({ id: 'b', promptTokens: range(16), maxNewTokens: 5, arrivalMs: 0 });
  engine.step();
  const c = engine.counters();
  assert.equal(c.running, 1);
  assert.equal(c.waiting, 1);
  assert.equal(c.kvBlocksTotal, 100);
  assert.equal(c.kvBlocksFree, 90);
  assert.equal(c.kvUsage, 0.1);
});

test('defaults: the KV pool comes from the cost model', () => {
  const engine = new EngineCore({
    spec,
    budgetTokens: 2048,
    maxSeqs: 64,
    kvPolicy: 'paged',
    blockSize: 16,
  });
  // The router seed's replica: 558,136 KV tokens by the seed's own formula, in blocks of 16.
  assert.equal(engine.kvBlocksTotal, 34_883);
});

test('errors carry stable codes', () => {
  const code = (c: string) => (err: unknown) => err instanceof EngineError && err.code === c;
  for (const bad of [
    { budgetTokens: 0 },
    { maxSeqs: 0 },
    { kvBlocks: 0 },
    { blockSize: 0 },
    { kvPolicy: 'x' as never },
  ]) {
    assert.throws(() => makeEngine(bad), code('ERR_CONFIG'), JSON.stringify(bad));
  }
  const engine = makeEngine({ kvBlocks: 10 });
  assert.throws(
    () => engine.add({ id: 'big', promptTokens: range(150), maxNewTokens: 20, arrivalMs: 0 }),
    code('ERR_NEVER_FITS'),
  );
  assert.throws(
    () => engine.add({ id: '', promptTokens: range(1), maxNewTokens: 1, arrivalMs: 0 }),
    code('ERR_INVALID_REQUEST'),
  );
  assert.throws(
    () => engine.add({ id: 'e', promptTokens: [], maxNewTokens: 1, arrivalMs: 0 }),
    code('ERR_INVALID_REQUEST'),
  );
  engine.add({ id: 'x', promptTokens: range(5), maxNewTokens: 1, arrivalMs: 0 });
  assert.throws(
    () => engine.add({ id: 'x', promptTokens: range(5), maxNewTokens: 1, arrivalMs: 0 }),
    code('ERR_DUPLICATE_ID'),
  );
});
