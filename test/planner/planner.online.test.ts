/** The online planner's pure core: the request window and its fit, its trace, the hysteresis. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { computeBlockKeys } from '../../src/kv/blockKey.ts';
import { Hysteresis } from '../../src/planner/online/hysteresis.ts';
import { fitOf, type Observation, RequestWindow } from '../../src/planner/online/window.ts';
import { chunkKeysOf, windowTrace } from '../../src/planner/online/windowTrace.ts';
import { TraceWorkload } from '../../src/workload/trace.ts';

const BLOCK = 16;
const toks = (seed: number, n: number) =>
  Array.from({ length: n }, (_, i) => (seed * 7919 + i * 31) % 60_000);

function obs(atMs: number, prompt: number[], outputTokens = 10): Observation {
  return {
    atMs,
    promptTokens: prompt.length,
    outputTokens,
    chunkKeys: chunkKeysOf(computeBlockKeys(prompt, BLOCK), BLOCK),
  };
}

describe('RequestWindow', () => {
  test('keeps the last windowMs of arrivals and fits their rate and lengths', () => {
    const w = new RequestWindow(10_000);
    for (let i = 0; i <= 20; i++) w.add(obs(i * 1000, toks(i, 100 + i), i + 1));
    const fit = w.fit(20_000);
    assert.equal(fit.requests, 11, 'arrivals 10 s .. 20 s');
    assert.equal(fit.ratePerS, 1);
    assert.equal(fit.promptTokens.p50, 115);
    assert.equal(fit.outputTokens.mean, 16);
    assert.equal(new RequestWindow(5).fit(0).ratePerS, 0);
  });

  test('a shared prefix shows as shared chunks; a bound caps what is held', () => {
    const system = toks(1, 2048);
    const shared = [0, 1, 2, 3].map((i) => obs(i, [...system, ...toks(10 + i, 600)]));
    const fit = fitOf(shared);
    // 4 requests x 5 full chunks (2,648 tokens), 4 of each request's shared: 12 repeats of 20.
    assert.equal(fit.sharedChunkFraction, 12 / 20);
    const small = new RequestWindow(1e9, 3);
    for (let i = 0; i < 10; i++) small.add(obs(i, toks(i, 10)));
    assert.equal(small.size, 3);
  });
});

describe('windowTrace', () => {
  test('the sim reads it back with the arrivals, lengths and shared ids of the window', () => {
    const system = toks(2, 1024);
    const window = [
      obs(5_000, [...system, ...toks(20, 700)], 7),
      obs(5_500, [...system, ...toks(21, 100)], 3),
      obs(7_000, toks(22, 300), 1),
    ];
    const text = windowTrace(window);
    const lines = text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.deepEqual(
      lines.map((l) => l.timestamp),
      [0, 500, 2000],
    );
    assert.deepEqual(lines[0].hash_ids.slice(0, 2), lines[1].hash_ids.slice(0, 2));
    assert.notEqual(lines[0].hash_ids[2], lines[1].hash_ids[2]);
    assert.deepEqual(
      lines.map((l) => l.output_length),
      [7, 3, 1],
    );
    const dir = mkdtempSync(join(tmpdir(), 'kvroute-window-'));
    try {
      const path = join(dir, 't.jsonl');
      writeFileSync(path, text);
      const trace = new TraceWorkload({ path, seed: 1, blockSize: BLOCK, rateScale: 1 });
      const arrivals = [];
      const it = trace.arrivals();
      for (let a = it.next(); !a.done; a = it.next()) arrivals.push(a.value);
      assert.deepEqual(
        arrivals.map((a) => a.atMs),
        [0, 500, 2000],
      );
      assert.deepEqual(
        arrivals.map((a) => a.promptLength),
        [1724, 1124, 300],
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('Hysteresis', () => {
  const DOWN = 300_000;
  const STEP = 30_000;

  test('up at once, down only after the lower answers held, to the stretch highest', () => {
    const h = new Hysteresis({ scaleDownMs: DOWN });
    assert.equal(h.step(4, 0).move, 'first');
    assert.equal(h.step(6, STEP).move, 'up');
    assert.equal(h.step(3, 2 * STEP).desired, 6);
    assert.equal(h.step(5, 3 * STEP).desired, 6);
    // The 6 answered at 30 s counts until 330 s; then the stretch's highest, 5, until 390 s.
    for (let t = 4 * STEP; t < STEP + DOWN; t += STEP) assert.equal(h.step(3, t).move, 'hold');
    const down = h.step(3, STEP + DOWN);
    assert.equal(down.move, 'down');
    assert.equal(down.desired, 5, 'the highest answer of the stretch keeps headroom');
    assert.equal(h.step(3, 3 * STEP + DOWN - 1).desired, 5);
    assert.equal(h.step(3, 3 * STEP + DOWN).desired, 3);
  });

  test('an answer equal to the count ends the stretch', () => {
    const h = new Hysteresis({ scaleDownMs: 100 });
    h.step(5, 0);
    h.step(3, 10);
    h.step(5, 60);
    assert.equal(h.step(3, 120).desired, 5, 'the stretch began again at 120');
    assert.equal(h.step(3, 220).desired, 3);
  });

  test('property: a constant load whose answer wobbles by one does not flap', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 50 }),
        fc.array(fc.boolean(), { minLength: 1, maxLength: 200 }),
        (n, highs) => {
          // Answers every 30 s, n + 1 at least once every 9 steps (270 s < 300 s).
          const answers = highs.map((hi, i) => (hi || i % 9 === 0 ? n + 1 : n));
          const h = new Hysteresis({ scaleDownMs: DOWN });
          let changes = 0;
          let last: number | null = null;
          answers.forEach((a, i) => {
            const { desired } = h.step(a, i * STEP);
            if (last !== null && desired !== last) changes++;
            last = desired;
          });
          assert.equal(changes, 0, 'the first answer is n + 1 and it stays');
          assert.equal(last, n + 1);
        },
      ),
    );
  });

  test('property: a higher load never gets fewer replicas at the same moment', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 0, max: 10 })), {
          minLength: 1,
          maxLength: 120,
        }),
        fc.integer({ min: 0, max: 8 }),
        (rows, downSteps) => {
          const low = new Hysteresis({ scaleDownMs: downSteps * STEP });
          const high = new Hysteresis({ scaleDownMs: downSteps * STEP });
          rows.forEach(([a, extra], i) => {
            const l = low.step(a, i * STEP).desired;
            const hi = high.step(a + extra, i * STEP).desired;
            assert.ok(hi >= l, `step ${i}: ${hi} < ${l}`);
          });
        },
      ),
    );
  });

  test('property: the count is never below the latest answer, and never below minReplicas', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 30 }), { minLength: 1 }), (answers) => {
        const h = new Hysteresis({ scaleDownMs: 2 * STEP, minReplicas: 1 });
        answers.forEach((a, i) => {
          const { desired } = h.step(a, i * STEP);
          assert.ok(desired >= Math.max(1, a));
        });
      }),
    );
  });
});
