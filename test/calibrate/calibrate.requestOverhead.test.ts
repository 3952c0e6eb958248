/**
 * The request overhead measured apart: read from vLLM's `vllm:request_prefill_time_seconds`
 * exposition (every label set summed, buckets ignored), one request's TTFT less its prefill time,
 * and the step-table fit holding it while it fits the knots around it.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { measuredRequestOverhead } from '../../src/calibrate/live.ts';
import {
  overheadOf,
  prefillTotals,
  textMsPerPromptToken,
} from '../../src/calibrate/requestOverhead.ts';
import { fitStepTable, type TableObservation } from '../../src/model/index.ts';

/** The histogram as vLLM's prometheus_client writes it (labels as vLLM v1 sets them). */
const exposition = (sums: [string, number, number][]) =>
  [
    '# HELP vllm:request_prefill_time_seconds Histogram of time spent in PREFILL phase for request.',
    '# TYPE vllm:request_prefill_time_seconds histogram',
    ...sums.flatMap(([model, sum, count]) => [
      `vllm:request_prefill_time_seconds_bucket{engine="0",le="0.3",model_name="${model}"} ${count}.0`,
      `vllm:request_prefill_time_seconds_bucket{engine="0",le="+Inf",model_name="${model}"} ${count}.0`,
      `vllm:request_prefill_time_seconds_count{engine="0",model_name="${model}"} ${count}.0`,
      `vllm:request_prefill_time_seconds_sum{engine="0",model_name="${model}"} ${sum}`,
    ]),
    '# HELP vllm:request_decode_time_seconds Histogram of time spent in DECODE phase for request.',
    'vllm:request_decode_time_seconds_sum{engine="0",model_name="m"} 9.5',
    'vllm:request_decode_time_seconds_count{engine="0",model_name="m"} 3.0',
  ].join('\n');

describe('the server side', () => {
  test('sum and count over every label set; none without the histogram', () => {
    assert.deepEqual(prefillTotals(exposition([['m', 0.25, 2]])), { sumS: 0.25, count: 2 });
    assert.deepEqual(
      prefillTotals(
        exposition([
          ['m', 0.25, 2],
          ['lora-a', 0.5, 1],
        ]),
      ),
      { sumS: 0.75, count: 3 },
    );
    assert.equal(prefillTotals('vllm:num_requests_running{engine="0"} 0.0\n'), null);
  });

  test('one request in between: its TTFT less its prefill; none or two: unknown', () => {
    const before = { sumS: 1.5, count: 4 };
    const one = overheadOf(before, { sumS: 1.62, count: 5 }, 140);
    assert.ok(one !== null && Math.abs(one - 20) < 1e-9, `${one}`);
    assert.equal(overheadOf(before, before, 140), null);
    assert.equal(overheadOf(before, { sumS: 1.9, count: 6 }, 140), null);
  });

  test('the median of at least 3, not below 0', () => {
    assert.equal(measuredRequestOverhead([]), null);
    assert.equal(measuredRequestOverhead([5, 7]), null);
    assert.equal(measuredRequestOverhead([9, 5, 7, 30]), 7);
    assert.equal(measuredRequestOverhead([-2, -1, -3]), 0);
  });
});

describe("a text prompt's tokenization", () => {
  test('the median of (text overhead - token-id overhead) / prompt tokens; null under 3 runs', () => {
    const run = (promptTokens: number, overheadMs: number) => ({ promptTokens, overheadMs });
    // Token-id prompts' overhead 2 ms; text runs at 1,000 tokens: 12, 14, 10 ms -> 0.01 ms/token.
    assert.equal(textMsPerPromptToken([run(1000, 12), run(1000, 14), run(1000, 10)], 2), 0.01);
    // An even count: the mean of the middle two (0.008 and 0.010).
    const four = textMsPerPromptToken(
      [run(1000, 10), run(1000, 12), run(500, 2), run(1000, 30)],
      2,
    );
    assert.ok(Math.abs(four! - 0.009) < 1e-12, `${four}`);
    assert.equal(textMsPerPromptToken([run(1000, 12), run(1000, 14)], 2), null);
    // Text no slower than token ids: 0, not negative.
    assert.equal(textMsPerPromptToken([run(1000, 1), run(1000, 1.5), run(1000, 2)], 2), 0);
  });
});

describe('the step-table fit', () => {
  // Prompts of 1, 2 and 4 chunks of 256 at 40 ms, a 128-token chunk at 25, decodes at 10 and 16.
  const P = (prefillTokens: number, decodeTokens: number, kvTokensRead: number) => ({
    prefillTokens,
    decodeTokens,
    kvTokensRead,
  });
  const ttft = (steps: TableObservation['steps'], ms: number): TableObservation => ({
    label: `${steps.length} chunks`,
    steps,
    perRequest: true,
    measuredMs: ms,
  });
  const gap = (steps: TableObservation['steps'], ms: number): TableObservation => ({
    label: 'gap',
    steps,
    perRequest: false,
    measuredMs: ms,
  });
  // A request overhead of 12 ms on every TTFT.
  const observations = [
    ttft([P(128, 0, 0)], 12 + 25),
    ttft([P(256, 0, 0)], 12 + 40),
    ttft([P(256, 0, 0), P(256, 0, 256)], 12 + 80),
    ttft([P(256, 0, 0), P(256, 0, 256), P(256, 0, 512), P(256, 0, 768)], 12 + 160),
    gap([P(0, 1, 300)], 10),
    gap([P(0, 4, 1200)], 16),
  ];

  test('held at the measured value, the knots fitted around it', () => {
    const fit = fitStepTable(observations, { msPerContextPair: 0, requestOverheadMs: 12 });
    assert.equal(fit.requestOverheadMs, 12);
    assert.ok(!fit.fixed.includes('requestOverheadMs'), fit.fixed.join());
    assert.deepEqual(
      fit.table.prefillMs.map((ms) => Math.round(ms * 1e6) / 1e6),
      [25, 40],
    );
    assert.ok(fit.maxErrorPct < 1e-6, `${fit.maxErrorPct}`);
  });

  test('a wrong measured value stays held: the knots take the difference', () => {
    const fit = fitStepTable(observations, { msPerContextPair: 0, requestOverheadMs: 2 });
    assert.equal(fit.requestOverheadMs, 2);
    assert.ok(fit.table.prefillMs[1]! > 40, `${fit.table.prefillMs}`);
  });

  test('a negative one is refused', () => {
    assert.throws(
      () => fitStepTable(observations, { requestOverheadMs: -1 }),
      (err: Error & { code?: string }) =>
        err.code === 'ERR_FIT' && /requestOverheadMs must be >= 0, got -1/.test(err.message),
    );
  });
});
