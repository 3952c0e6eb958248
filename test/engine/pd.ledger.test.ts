/**
 * The P/D ledger returns to zero on both pools: whatever mix of prefills, pulls, lost pulls,
 * expiries and aborts, once every request is over a producer holds no block and a consumer has
 * no pulled block waiting, and both pools are empty (every block free).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { EngineCore } from '../../src/engine/core.ts';
import type { RequestFinished } from '../../src/engine/types.ts';
import { makeReplicaSpec } from '../../src/model/index.ts';

const spec = makeReplicaSpec();
const engine = (kvBlocks: number) =>
  new EngineCore({
    spec,
    budgetTokens: 256,
    maxSeqs: 16,
    kvPolicy: 'paged',
    blockSize: 16,
    kvBlocks,
    kvTransfer: { abortTimeoutMs: 50 },
  });

/** Steps as a driver does: the clock advances by each step and holds past the timeout go. */
const clock = { nowMs: 0 };
function drain(core: EngineCore, onFinish: (f: RequestFinished) => void): void {
  for (let i = 0; i < 100_000 && core.hasWork(); i++) {
    const step = core.step();
    clock.nowMs += Math.max(step.durationMs, 1);
    core.expireTransfers(clock.nowMs);
    for (const f of step.finished) onFinish(f);
  }
  assert.equal(core.hasWork(), false);
}

const op = fc.record({
  promptTokens: fc.integer({ min: 1, max: 300 }),
  prefix: fc.integer({ min: 0, max: 3 }),
  outcome: fc.constantFrom('pull', 'lost', 'abort-prefill', 'abort-decode'),
  outputTokens: fc.integer({ min: 1, max: 8 }),
});

test('property: P/D ledgers on the prefill and decode pools return to zero', () => {
  fc.assert(
    fc.property(
      fc.array(op, { minLength: 1, maxLength: 12 }),
      fc.integer({ min: 24, max: 200 }),
      (ops, kvBlocks) => {
        const producer = engine(kvBlocks);
        const consumer = engine(kvBlocks);
        clock.nowMs = 0;
        ops.forEach((o, i) => {
          const tokens = Array.from({ length: o.promptTokens }, (_, t) =>
            t < 64 ? o.prefix * 1000 + t : i * 1000 + t,
          );
          const id = `r${i}`;
          try {
            producer.add({
              id,
              promptTokens: tokens,
              maxNewTokens: 1,
              arrivalMs: clock.nowMs,
              kvTransfer: 'remote-decode',
            });
          } catch {
            return; // never fits this pool
          }
          if (o.outcome === 'abort-prefill') producer.abort(id);
          let held: number[] | null = null;
          drain(producer, (f) => {
            if (f.id === id) held = f.heldBlockIds ?? null;
          });
          producer.expireTransfers(clock.nowMs);
          if (held === null) return;
          if (o.outcome === 'lost') return; // never pulled: the timeout frees it
          if (!producer.isTransferHeld(id, held)) return; // expired while others ran
          assert.equal(producer.releaseTransfer(id, held), true);
          try {
            consumer.add({
              id,
              promptTokens: tokens,
              maxNewTokens: o.outputTokens,
              arrivalMs: clock.nowMs,
              kvTransfer: 'remote-prefill',
            });
          } catch {
            return;
          }
          if (o.outcome === 'abort-decode') consumer.abort(id);
          drain(consumer, () => {});
        });
        producer.expireTransfers(clock.nowMs);
        producer.expireTransfers(clock.nowMs + 1_000);
        for (const core of [producer, consumer]) {
          const c = core.counters();
          assert.equal(c.kvTransfer!.heldBlocks, 0);
          assert.equal(c.kvTransfer!.heldRequests, 0);
          assert.equal(c.kvTransfer!.injectedBlocks, 0);
          assert.equal(c.kvBlocksFree, c.kvBlocksTotal);
          assert.ok(c.prefixCacheHitsTokens <= c.prefixCacheQueriesTokens);
        }
      },
    ),
    { numRuns: 150 },
  );
});
