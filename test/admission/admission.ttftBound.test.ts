/** The TTFT bound's verdict: the prefill queued ahead on the chosen replica plus the request's own. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ttftBoundVerdict } from '../../src/admission/ttftBound.ts';

test('admits up to the bound, refuses past it with the wait that would bring it under', () => {
  // 71.3 µs per token: the seed's 8,000-token cold prompt alone is 570.4 ms.
  assert.deepEqual(ttftBoundVerdict(0, 8_000, 71.3, 600), { admitted: true, predictedMs: 570.4 });
  const behind = ttftBoundVerdict(2_000, 2_000, 100, 300);
  assert.equal(behind.admitted, false);
  assert.equal(behind.predictedMs, 400);
  assert.ok(!behind.admitted && behind.retryAfterMs === 100);
  assert.equal(ttftBoundVerdict(1_000, 2_000, 100, 300).admitted, true, 'exactly at the bound');
  assert.equal(ttftBoundVerdict(0, 0, 100, 1).admitted, true, 'a fully cached request');
});
