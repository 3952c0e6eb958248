/**
 * vLLM's sampling knobs as node-llama-cpp's sampler options: a knob that is off reaches it as
 * null (left out of its sampler chain), never as its own defaults (top-k 40, top-p 0.95) or as
 * top-k 0 (a sort of the whole vocabulary per token); greedy below vLLM's 1e-5; a seed per draw.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { samplerOptions } from '../../src/engine/runtime/llamaCpp/samplerOptions.ts';

const off = { temperature: 1, topK: null, topP: null, minP: null, seed: 7 };

test('knobs that are off are null; given ones pass through', () => {
  assert.deepEqual(samplerOptions(off, 100), {
    temperature: 1,
    topK: null,
    topP: null,
    minP: 0,
    seed: 107,
  });
  assert.deepEqual(samplerOptions({ ...off, topK: 0, topP: 1 }, 0), samplerOptions(off, 0));
  assert.deepEqual(samplerOptions({ ...off, topK: -1 }, 0), samplerOptions(off, 0));
  const on = samplerOptions({ temperature: 0.7, topK: 5, topP: 0.9, minP: 0.05, seed: 1 }, 2);
  assert.deepEqual(on, { temperature: 0.7, topK: 5, topP: 0.9, minP: 0.05, seed: 3 });
});

test('greedy below 1e-5: temperature 0 and nothing else', () => {
  assert.deepEqual(samplerOptions({ ...off, temperature: 0, topK: 5 }, 3), { temperature: 0 });
  assert.deepEqual(samplerOptions({ ...off, temperature: 9e-6 }, 3), { temperature: 0 });
});

test('by property: one seed per drawn token, a 32-bit unsigned integer', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 2 ** 32 - 1 }),
      fc.integer({ min: 0, max: 1e6 }),
      (seed, drawn) => {
        const a = samplerOptions({ ...off, seed }, drawn).seed!;
        const b = samplerOptions({ ...off, seed }, drawn + 1).seed!;
        assert.ok(Number.isInteger(a) && a >= 0 && a < 2 ** 32);
        assert.equal(b, (a + 1) >>> 0);
      },
    ),
  );
});
