/**
 * The engine's CPU tier (vLLM's OffloadingConnector, modelled): GPU evictions are kept in an LRU
 * tier of fixed size, a prompt's prefix is loaded back from it instead of recomputed, and the
 * events say where every block lives (medium "CPU" beside the pool's GPU events).
 * Invariants by property: a block is in at most one tier of a replica; the tier never exceeds
 * its size; every load was stored first; the events replayed give exactly both tiers' contents.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { EngineCore } from '../../src/engine/core.ts';
import { cpuReloadMs } from '../../src/engine/connector/offloading.ts';
import type { EngineConfig, StepResult } from '../../src/engine/types.ts';
import type { BlockKey } from '../../src/kv/blockKey.ts';
import { CpuTier, NO_SLOT } from '../../src/kv/cpuTier.ts';
import type { KvEvent } from '../../src/kv/events.ts';
import { kvBytesPerToken, makeReplicaSpec } from '../../src/model/index.ts';

const spec = makeReplicaSpec();
const BLOCK = 16;

function makeEngine(kvBlocks: number, cpuBlocks: number, extra: Partial<EngineConfig> = {}) {
  return new EngineCore({
    spec,
    budgetTokens: 512,
    maxSeqs: 8,
    kvPolicy: 'paged',
    blockSize: BLOCK,
    kvBlocks,
    cpuOffload: { cpuBlocks, cpuKvGbps: 50 },
    ...extra,
  });
}

const range = (n: number, start = 0) => Array.from({ length: n }, (_, i) => start + i);

function drain(engine: EngineCore, onStep: (r: StepResult) => void = () => {}): StepResult[] {
  const out: StepResult[] = [];
  for (let i = 0; engine.hasWork(); i++) {
    assert.ok(i < 100_000, 'engine does not go idle');
    const r = engine.step();
    onStep(r);
    out.push(r);
  }
  return out;
}

/** Both tiers as the events say, with a check that each CPU removal was stored first. */
class TierModel {
  gpu = new Set<BlockKey>();
  cpu = new Set<BlockKey>();
  apply(events: readonly KvEvent[]): void {
    for (const e of events) {
      if (e.type === 'AllBlocksCleared') {
        this.gpu.clear();
        this.cpu.clear();
        continue;
      }
      const set = e.medium === 'CPU' ? this.cpu : this.gpu;
      for (const k of e.blockKeys) {
        if (e.type === 'BlockStored') set.add(k);
        else {
          assert.ok(set.has(k), `${e.medium ?? 'GPU'} removal of a block never stored there`);
          set.delete(k);
        }
      }
    }
  }
}

test('a prefix pushed out of the GPU pool is loaded back from the CPU tier, not recomputed', () => {
  // 40 blocks of GPU: a 480-token prompt (30 blocks) is evicted by a second one of 480.
  const engine = makeEngine(40, 100);
  const model = new TierModel();
  const a = range(480);
  const b = range(480, 10_000);
  engine.add({ id: 'a', promptTokens: a, maxNewTokens: 1, arrivalMs: 0 });
  drain(engine, (r) => model.apply(r.events));
  engine.add({ id: 'b', promptTokens: b, maxNewTokens: 1, arrivalMs: 1 });
  drain(engine, (r) => model.apply(r.events));
  // a's blocks went to the CPU tier as b took their GPU blocks (CPU store before GPU removal).
  assert.ok(model.cpu.size > 0);
  assert.deepEqual(new Set(engine.cpuBlockKeys()), model.cpu);
  const before = engine.counters();
  engine.add({ id: 'a2', promptTokens: a, maxNewTokens: 1, arrivalMs: 2 });
  const steps = drain(engine, (r) => model.apply(r.events));
  const after = engine.counters();
  // 29 blocks usable (the last prompt token is computed): all cached, GPU or CPU.
  const finished = steps.flatMap((r) => r.finished).find((f) => f.id === 'a2');
  assert.equal(finished?.cachedTokens, 29 * BLOCK);
  const loaded = after.cpuOffload!.loadedTokens - before.cpuOffload!.loadedTokens;
  assert.ok(loaded > 0 && loaded <= 29 * BLOCK);
  // As vLLM counts them: the tier's tokens are the connector's hits, not the GPU prefix cache's
  // (vllm:prefix_cache_hits vs vllm:external_prefix_cache_hits), whose queries are the prompt
  // less its GPU-cached part.
  const local = 29 * BLOCK - loaded;
  assert.equal(after.prefixCacheHitsTokens - before.prefixCacheHitsTokens, local);
  const ext = (c: typeof after) => c.cpuOffload!;
  assert.equal(ext(after).externalHitsTokens - ext(before).externalHitsTokens, loaded);
  assert.equal(ext(after).externalQueriesTokens - ext(before).externalQueriesTokens, 480 - local);
  assert.equal(
    after.prefixCacheQueriesTokens - before.prefixCacheQueriesTokens,
    480,
    'the GPU prefix cache is asked about the whole prompt',
  );
  // Its first step carries the reload: tokens x KV bytes per token over 50 GB/s.
  const bytes = kvBytesPerToken(spec.model, spec.kvDtype);
  assert.ok(steps[0]!.durationMs > cpuReloadMs(loaded, bytes, 50));
  const events = steps.flatMap((r) => r.events);
  const cpuRemoved = events.filter((e) => e.type === 'BlockRemoved' && e.medium === 'CPU');
  assert.ok(cpuRemoved.length > 0, 'the load takes the blocks out of the tier');
  assert.deepEqual(new Set(engine.cachedBlockKeys()), model.gpu);
});

test('without room in the tier nothing is stored; a tier of 0 blocks is the GPU pool alone', () => {
  const engine = makeEngine(40, 0);
  const a = range(480);
  engine.add({ id: 'a', promptTokens: a, maxNewTokens: 1, arrivalMs: 0 });
  drain(engine);
  engine.add({ id: 'b', promptTokens: range(480, 10_000), maxNewTokens: 1, arrivalMs: 1 });
  const events = drain(engine).flatMap((r) => r.events);
  assert.equal(
    events.some((e) => e.type !== 'AllBlocksCleared' && e.medium === 'CPU'),
    false,
  );
  assert.equal(engine.counters().cpuOffload!.storedBlocks, 0);
});

test('CpuTier: slots in the order stored, bounded, a freed slot reused', () => {
  const tier = new CpuTier(100, 2);
  assert.equal(tier.oldest, NO_SLOT);
  const a = tier.push();
  const b = tier.push();
  assert.deepEqual([a, b], [100, 101]);
  assert.equal(tier.full, true);
  assert.equal(tier.isSlot(a) && !tier.isSlot(99), true);
  tier.remove(a);
  assert.deepEqual(tier.slots(), [b]);
  assert.equal(tier.push(), a); // the freed slot, now the most recent
  assert.deepEqual(tier.slots(), [b, a]);
  assert.equal(tier.after(b), a);
  tier.clear();
  assert.equal(tier.size, 0);
  assert.deepEqual(tier.slots(), []);
  assert.throws(() => new CpuTier(0, -1), RangeError);
});

test('property: at most one tier per block, the tier within its size, every load stored first', () => {
  const request = fc.record({
    family: fc.integer({ min: 0, max: 5 }),
    sharedBlocks: fc.integer({ min: 0, max: 8 }),
    tailTokens: fc.integer({ min: 1, max: 90 }),
    maxNewTokens: fc.integer({ min: 1, max: 6 }),
    stepsAfter: fc.integer({ min: 0, max: 3 }),
  });
  fc.assert(
    fc.property(
      fc.integer({ min: 16, max: 48 }),
      fc.integer({ min: 0, max: 30 }),
      fc.array(request, { minLength: 1, maxLength: 30 }),
      (kvBlocks, cpuBlocks, requests) => {
        const engine = makeEngine(kvBlocks, cpuBlocks, { budgetTokens: 64, maxSeqs: 4 });
        const model = new TierModel();
        let stored = 0;
        const check = (r: StepResult) => {
          model.apply(r.events);
          for (const e of r.events) {
            if (e.type === 'BlockStored' && e.medium === 'CPU') stored += e.blockKeys.length;
          }
          const gpu = new Set(engine.cachedBlockKeys());
          const cpu = engine.cpuBlockKeys();
          assert.ok(cpu.length <= cpuBlocks, 'the tier exceeds its size');
          for (const k of cpu) assert.ok(!gpu.has(k), 'a block in both tiers');
          assert.deepEqual(gpu, model.gpu);
          assert.deepEqual(new Set(cpu), model.cpu);
          const c = engine.counters().cpuOffload!;
          assert.ok(c.loadedBlocks <= c.storedBlocks, 'a load that was never stored');
          assert.equal(c.storedBlocks, stored);
        };
        requests.forEach((q, i) => {
          const shared = range(q.sharedBlocks * BLOCK, q.family * 100_000);
          const prompt = [...shared, ...range(q.tailTokens, 1_000_000 + i * 1000)];
          engine.add({
            id: `r${i}`,
            promptTokens: prompt,
            maxNewTokens: q.maxNewTokens,
            arrivalMs: i,
          });
          for (let s = 0; s < q.stepsAfter && engine.hasWork(); s++) check(engine.step());
        });
        drain(engine, check);
      },
    ),
    { numRuns: 150, seed: 29 },
  );
});
