/**
 * The harnesses' metric definitions (src/results/harnessMetrics.ts) on hand-made records: the
 * interval each one's throughput is over, failed requests' time counted and their tokens not,
 * TPOT per request, inference-perf's NTPOT and SGLang's mean concurrency, and the stages.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  type HarnessRecord,
  harnessSummary,
  recordOutputTokens,
  stageSummaries,
} from '../../src/results/harnessMetrics.ts';

/** A success sent at `atMs`: first token `ttftMs` later, then `tokens - 1` at `tpotMs`. */
function ok(atMs: number, ttftMs: number, tokens: number, tpotMs: number): HarnessRecord {
  return {
    arrivalMs: atMs,
    ttftMs,
    tpotMs: tokens > 1 ? tpotMs : Number.NaN,
    endMs: atMs + ttftMs + (tokens - 1) * tpotMs,
    promptTokens: 100,
  };
}

const records: HarnessRecord[] = [
  ok(1000, 200, 11, 10), // ends at 1,300
  ok(2000, 100, 101, 20), // ends at 4,100
  { arrivalMs: 3000, ttftMs: null, tpotMs: null, endMs: 6000, promptTokens: 100, error: 'timeout' },
];

test('output tokens come back from TTFT, TPOT and latency', () => {
  assert.equal(recordOutputTokens(records[0]!), 11);
  assert.equal(recordOutputTokens(records[1]!), 101);
  assert.equal(recordOutputTokens(ok(0, 50, 1, 0)), 1);
});

test('vllm and sglang: from the start to the last end; inference-perf: from the first send', () => {
  const o = { startMs: 0, runEndMs: 10_000 };
  const vllm = harnessSummary('vllm', records, o);
  assert.equal(vllm.fromMs, 0);
  assert.equal(vllm.toMs, 6000); // the failed request's end counts
  assert.equal(vllm.completed, 2);
  assert.equal(vllm.failed, 1);
  assert.equal(vllm.outputTokensPerS, 112 / 6);
  assert.equal(vllm.totalTokensPerS, (112 + 200) / 6);
  assert.equal(vllm.tpotMs.count, 2);
  assert.equal(vllm.normalizedTpotMs, undefined);
  const perf = harnessSummary('inference-perf', records, o);
  assert.equal(perf.fromMs, 1000);
  assert.equal(perf.outputTokensPerS, 112 / 5);
  assert.equal(perf.normalizedTpotMs!.count, 2);
  const sglang = harnessSummary('sglang', records, o);
  assert.equal(sglang.outputTokensPerS, vllm.outputTokensPerS);
  assert.equal(sglang.meanConcurrency, (0.3 + 2.1) / 6);
});

test('warm-up requests are left out; an unfinished one ends at the run’s end', () => {
  const unfinished: HarnessRecord = {
    arrivalMs: 5000,
    ttftMs: null,
    tpotMs: null,
    endMs: null,
    promptTokens: 10,
    error: 'unfinished',
  };
  const s = harnessSummary('vllm', [...records, unfinished], { startMs: 1500, runEndMs: 9000 });
  assert.equal(s.completed, 1);
  assert.equal(s.failed, 2);
  assert.equal(s.fromMs, 1500);
  assert.equal(s.toMs, 9000);
});

test('stages: requests by the time they were scheduled', () => {
  const held: HarnessRecord = { ...ok(12_000, 100, 2, 10), scheduledMs: 9000 };
  const stages = stageSummaries(
    [
      { ratePerS: 1, startMs: 0, endMs: 10_000 },
      { ratePerS: 2, startMs: 10_000, endMs: 20_000 },
    ],
    [...records, held],
    20_000,
  );
  assert.deepEqual(
    stages.map((s) => [s.sent, s.completed, s.timedOut, s.failed]),
    [
      [4, 3, 1, 0],
      [0, 0, 0, 0],
    ],
  );
  assert.equal(stages[0]!.achievedRatePerS, 0.4);
});
