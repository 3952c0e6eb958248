/**
 * The router's model of a llama.cpp replica's slots (router/index/slotCache.ts) against llama-server's
 * slot choice on token ids (support/llamaSlots.ts): a predicted hit never exceeds what the slot
 * the engine picks really holds, and equals it when prompts end inside a block. Also the
 * router's use of it: hits predicted from slots, not from an unbounded pool.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { Router } from '../../src/router/index.ts';
import { SlotCache } from '../../src/router/index/slotCache.ts';
import { TokenSlots } from '../support/llamaSlots.ts';

const BS = 4;

/** Prompt tokens of whole blocks (block b is tokens b*BS..b*BS+BS-1) plus a unique tail. */
function promptOf(blocks: readonly number[], tail: number, unique: number): number[] {
  const out: number[] = [];
  for (const b of blocks) for (let j = 0; j < BS; j++) out.push(b * BS + j);
  for (let j = 0; j < tail; j++) out.push(1_000_000 + unique * BS + j);
  return out;
}

test('one slot, two alternating prefixes: the second finds nothing (it was overwritten)', () => {
  const m = new SlotCache({ slots: 1 });
  const a = [1, 2, 3, 4, 5];
  const b = [9, 8, 7, 6, 5];
  assert.equal(m.predict(a, 22, BS), 0);
  m.assign('r1', a, 22, BS);
  m.release('r1');
  assert.equal(m.predict(a, 22, BS), 5);
  assert.equal(m.predict(b, 22, BS), 0);
  m.assign('r2', b, 22, BS);
  m.release('r2');
  assert.equal(m.predict(a, 22, BS), 0, 'a unbounded pool would predict 5 here');
});

test('a busy slot is not a hit; with every slot busy the request waits and predicts 0', () => {
  const m = new SlotCache({ slots: 2 });
  m.assign('r1', [1, 2, 3], 14, BS);
  m.release('r1');
  m.assign('r2', [1, 2, 3], 14, BS); // takes the slot holding [1,2,3]
  assert.equal(m.predict([1, 2, 3], 14, BS), 0, 'only an empty slot is idle');
  m.assign('r3', [7], 5, BS);
  assert.equal(m.predict([1, 2, 3], 14, BS), 0, 'no idle slot');
  m.assign('r4', [1, 2, 3], 14, BS); // deferred
  m.release('r2'); // r4 takes the freed slot
  assert.equal(m.predict([1, 2, 3], 14, BS), 0);
  m.release('r4');
  assert.equal(m.predict([1, 2, 3], 14, BS), 3);
});

test('the host prompt cache keeps an evicted prompt as a tier (--cache-ram > 0)', () => {
  const m = new SlotCache({ slots: 1, hostBlocks: 100 });
  m.assign('r1', [1, 2, 3, 4], 18, BS);
  m.release('r1');
  m.assign('r2', [9, 9, 9, 9], 18, BS);
  m.release('r2');
  assert.equal(m.predict([1, 2, 3, 4], 18, BS), 4, 'loaded back from the host cache');
});

test('the last prompt token is always evaluated: a whole-prompt match is capped', () => {
  const m = new SlotCache({ slots: 1 });
  m.assign('r1', [1, 2], 8, BS);
  m.release('r1');
  assert.equal(m.predict([1, 2], 8, BS), 1);
});

test('property: predicted hit <= what the slot llama-server picks holds (= when the prompt ends inside a block)', () => {
  const op = fc.oneof(
    fc.record({
      kind: fc.constant('arrive' as const),
      customer: fc.integer({ min: 0, max: 5 }),
      turns: fc.integer({ min: 0, max: 4 }),
      tail: fc.integer({ min: 0, max: BS - 1 }),
    }),
    fc.record({ kind: fc.constant('finish' as const), which: fc.nat() }),
  );
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 4 }), fc.array(op, { maxLength: 60 }), (n, ops) => {
      const model = new SlotCache({ slots: n });
      const engine = new TokenSlots(n);
      const inFlight: { id: string; slot: number | null; prompt: number[] }[] = [];
      const waiting: { id: string; prompt: number[] }[] = [];
      let seq = 0;
      const place = () => {
        while (waiting.length > 0) {
          const got = engine.take(waiting[0]!.prompt);
          if (!got) break;
          const w = waiting.shift()!;
          inFlight.find((f) => f.id === w.id)!.slot = got.slot;
        }
      };
      for (const o of ops) {
        if (o.kind === 'arrive') {
          // Customer c's system prompt (blocks 100c..100c+5), then turn blocks.
          const blocks = [...Array(6).keys()].map((i) => 100 * o.customer + i);
          for (let t = 0; t < o.turns; t++) blocks.push(100 * o.customer + 50 + t);
          const id = `r${seq++}`;
          const prompt = promptOf(blocks, o.tail, seq);
          const predicted = model.predict(blocks, prompt.length, BS) * BS;
          model.assign(id, blocks, prompt.length, BS);
          const got = waiting.length === 0 ? engine.take(prompt) : null;
          if (got) {
            assert.ok(predicted <= got.cached, `predicted ${predicted} > served ${got.cached}`);
            if (o.tail > 0) assert.equal(predicted, got.cached);
            inFlight.push({ id, slot: got.slot, prompt });
          } else {
            assert.equal(predicted, 0);
            inFlight.push({ id, slot: null, prompt });
            waiting.push({ id, prompt });
          }
        } else {
          const started = inFlight.filter((f) => f.slot !== null);
          if (started.length === 0) continue;
          const f = started[o.which % started.length]!;
          inFlight.splice(inFlight.indexOf(f), 1);
          engine.release(f.slot!);
          model.release(f.id);
          place();
        }
      }
    }),
    { numRuns: 300 },
  );
});

test('property: with the host prompt cache, the predicted hit is what llama-server serves, to the block', () => {
  const op = fc.oneof(
    fc.record({
      kind: fc.constant('arrive' as const),
      customer: fc.integer({ min: 0, max: 7 }),
      turns: fc.integer({ min: 0, max: 6 }),
    }),
    fc.record({ kind: fc.constant('finish' as const), which: fc.nat() }),
  );
  const host = fc.record({
    hostBlocks: fc.integer({ min: 1, max: 48 }),
    saveIdleSlots: fc.boolean(),
    unifiedKv: fc.boolean(),
  });
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 4 }),
      host,
      fc.array(op, { maxLength: 60 }),
      (n, h, ops) => {
        const model = new SlotCache({ slots: n, ...h });
        const engine = new TokenSlots(n, 0.1, { ...h, hostTokens: h.hostBlocks * BS });
        const inFlight: { id: string; slot: number | null; prompt: number[] }[] = [];
        const waiting: { id: string; prompt: number[] }[] = [];
        let seq = 0;
        const place = () => {
          while (waiting.length > 0) {
            const got = engine.take(waiting[0]!.prompt);
            if (!got) break;
            const w = waiting.shift()!;
            inFlight.find((f) => f.id === w.id)!.slot = got.slot;
          }
        };
        for (const o of ops) {
          if (o.kind === 'arrive') {
            // Whole blocks only: the token-level shares (f_keep, f_sim) equal the block-level ones.
            const blocks = [...Array(6).keys()].map((i) => 100 * o.customer + i);
            for (let t = 0; t < o.turns; t++) blocks.push(100 * o.customer + 50 + t);
            const id = `r${seq++}`;
            const prompt = promptOf(blocks, 0, seq);
            const predicted = model.predict(blocks, prompt.length, BS);
            model.assign(id, blocks, prompt.length, BS);
            const got = waiting.length === 0 ? engine.take(prompt) : null;
            if (got) {
              // The engine reuses up to the prompt less one token; the model counts whole blocks.
              assert.equal(predicted, Math.floor(got.cached / BS), `served ${got.cached}`);
              inFlight.push({ id, slot: got.slot, prompt });
            } else {
              assert.equal(predicted, 0);
              inFlight.push({ id, slot: null, prompt });
              waiting.push({ id, prompt });
            }
            assert.deepEqual(
              model.hostEntries().map((e) => e.length * BS),
              engine.host.map((e) => e.length),
              'the host caches hold prompts of the same sizes',
            );
          } else {
            const started = inFlight.filter((f) => f.slot !== null);
            if (started.length === 0) continue;
            const f = started[o.which % started.length]!;
            inFlight.splice(inFlight.indexOf(f), 1);
            engine.release(f.slot!);
            model.release(f.id);
            place();
          }
        }
      },
    ),
    { numRuns: 300 },
  );
});

test('a slot reused by another prefix: its prompt still hits from the host cache; with --cache-ram 0 it does not', () => {
  const a = [1, 2, 3, 4, 5, 6];
  const b = [9, 8, 7, 6, 5, 4];
  const run = (hostBlocks: number) => {
    const m = new SlotCache({ slots: 1, hostBlocks, saveIdleSlots: true });
    m.assign('r1', a, 6 * BS + 2, BS);
    m.release('r1');
    m.assign('r2', b, 6 * BS + 2, BS);
    m.release('r2');
    return m.predict(a, 6 * BS + 2, BS);
  };
  assert.equal(run(0), 0);
  assert.equal(run(64), 6);
  // A bound smaller than the prompt keeps nothing of it.
  assert.equal(run(5), 0);
});

test('a unified KV cache: idle slots are cleared once saved, so a hit comes from the host cache', () => {
  const m = new SlotCache({ slots: 2, hostBlocks: 64, saveIdleSlots: true, unifiedKv: true });
  m.assign('r1', [1, 2, 3, 4], 18, BS);
  m.release('r1');
  m.assign('r2', [7, 7, 7, 7], 18, BS);
  assert.deepEqual(
    m.held().map((k) => k.length),
    [0, 4],
    'the idle slot was cleared',
  );
  assert.equal(m.predict([1, 2, 3, 4], 18, BS), 4, 'loaded from the host cache');
});

test('the router predicts a slot replica from its slots, an index replica from its record', () => {
  const router = new Router({ replicas: ['a', 'b'], indexMode: 'approx', policy: 'cost' });
  router.setSlotCache('a', { slots: 1 });
  const keysA = [11, 12, 13, 14];
  const keysB = [21, 22, 23, 24];
  const request = (id: string, blockKeys: number[], avoid: string[]) => ({
    id,
    promptTokens: 18,
    blockSize: BS,
    blockKeys,
    avoid,
  });
  for (const [i, keys] of [keysA, keysB].entries()) {
    for (const r of ['a', 'b']) {
      const d = router.route(request(`w${i}${r}`, keys, [r === 'a' ? 'b' : 'a']), 0);
      router.onFinished(d.requestId, 0);
    }
  }
  // Both saw A then B. Replica a's one slot holds only B; b's record holds both.
  const onA = router.route(request('qa', keysA, ['b']), 0);
  assert.equal(onA.cachedTokens, 0);
  router.onFinished('qa', 0);
  const onB = router.route(request('qb', keysA, ['a']), 0);
  assert.equal(onB.cachedTokens, 16);
});
