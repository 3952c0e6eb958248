/**
 * A run's figures as each benchmark harness defines them, from the requests' records (pure):
 *
 * - `vllm` (`vllm bench serve`; `vllm/benchmarks/serve.py`, `calculate_metrics` and
 *   `benchmark`): the duration `dur_s` runs from the benchmark's start (before the first
 *   request's delay) to the end of the last request, failed ones included; output token
 *   throughput is the successful requests' output tokens over it (a failed request adds 0 tokens
 *   but its time); TTFT over successes; TPOT per success with more than one token,
 *   (latency - TTFT) / (output tokens - 1); ITL every gap between tokens.
 * - `sglang` (`python/sglang/bench_serving.py`, `calculate_metrics`): the same definitions as
 *   vLLM's (its code is derived from it), the first request sent at the start; it also prints
 *   the mean concurrency, the sum of the successes' latencies over the duration.
 * - `inference-perf` (`inference_perf/reportgen/base.py`, `summarize_requests`): the time is
 *   from the first request's start to the last request's end, over all requests (failed ones
 *   too) of the stage or the run; output tokens/s over the successful requests; TTFT is the
 *   first token's time less the start, TPOT (last token - first token) / (tokens - 1), and it
 *   adds a normalized TPOT, latency / output tokens, for every success. Per stage when the load
 *   has stages.
 *
 * In the simulator a request's last token is its end, so TPOT agrees across the three; the
 * throughput's interval is what differs. Requests arriving in the warm-up are left out, as a
 * harness's warm-up requests are; the benchmark's start is then the warm-up's end.
 */
import type { RequestRecord } from './requestRecord.ts';
import { type Percentiles, summarize } from './stats.ts';

export const HARNESSES = ['vllm', 'inference-perf', 'sglang'] as const;
export type Harness = (typeof HARNESSES)[number];

/** What a harness needs of one request (`RequestRecord` has it). */
export type HarnessRecord = Pick<
  RequestRecord,
  'arrivalMs' | 'endMs' | 'ttftMs' | 'tpotMs' | 'promptTokens' | 'error' | 'scheduledMs'
>;

export interface HarnessSummary {
  harness: Harness;
  /** The interval the throughputs are over, ms on the run's clock. */
  fromMs: number;
  toMs: number;
  /** Successful requests, and the others (failed, timed out, refused, unfinished). */
  completed: number;
  failed: number;
  requestsPerS: number;
  outputTokensPerS: number;
  /** Prompt and output tokens of the successes, per second. */
  totalTokensPerS: number;
  ttftMs: Percentiles;
  tpotMs: Percentiles;
  /** inference-perf: latency / output tokens, per success. */
  normalizedTpotMs?: Percentiles;
  /** SGLang: the successes' latencies summed over the duration. */
  meanConcurrency?: number;
}

/** A successful record's output tokens: 1 + (latency - TTFT) / TPOT (NaN TPOT: one token). */
export function recordOutputTokens(r: HarnessRecord): number {
  if (r.tpotMs === null || Number.isNaN(r.tpotMs) || r.tpotMs <= 0) return 1;
  return 1 + Math.round((r.endMs! - r.arrivalMs - r.ttftMs!) / r.tpotMs);
}

function succeeded(r: HarnessRecord): boolean {
  return r.error === undefined && r.endMs !== null && r.ttftMs !== null;
}

/**
 * The run by `harness`'s definitions, over the records arriving at or after `startMs` (the
 * warm-up's end). `endMs` null (unfinished at the run's end) count as failed, ending at
 * `runEndMs`.
 */
export function harnessSummary(
  harness: Harness,
  records: readonly HarnessRecord[],
  o: { startMs: number; runEndMs: number },
): HarnessSummary {
  const measured = records.filter((r) => r.arrivalMs >= o.startMs);
  let lastEndMs = o.startMs;
  let firstSendMs = Number.POSITIVE_INFINITY;
  for (const r of measured) {
    lastEndMs = Math.max(lastEndMs, r.endMs ?? o.runEndMs);
    firstSendMs = Math.min(firstSendMs, r.arrivalMs);
  }
  const fromMs =
    harness === 'inference-perf' && Number.isFinite(firstSendMs) ? firstSendMs : o.startMs;
  const toMs = lastEndMs;
  const seconds = (toMs - fromMs) / 1000;
  const ok = measured.filter(succeeded);
  let outputTokens = 0;
  let promptTokens = 0;
  let latencySumMs = 0;
  const ttft: number[] = [];
  const tpot: number[] = [];
  const ntpot: number[] = [];
  for (const r of ok) {
    const out = recordOutputTokens(r);
    const latencyMs = r.endMs! - r.arrivalMs;
    outputTokens += out;
    promptTokens += r.promptTokens;
    latencySumMs += latencyMs;
    ttft.push(r.ttftMs!);
    if (out > 1) tpot.push(r.tpotMs!);
    ntpot.push(latencyMs / out);
  }
  const perS = (x: number) => (seconds > 0 ? x / seconds : 0);
  return {
    harness,
    fromMs,
    toMs,
    completed: ok.length,
    failed: measured.length - ok.length,
    requestsPerS: perS(ok.length),
    outputTokensPerS: perS(outputTokens),
    totalTokensPerS: perS(outputTokens + promptTokens),
    ttftMs: summarize(ttft),
    tpotMs: summarize(tpot),
    ...(harness === 'inference-perf' && { normalizedTpotMs: summarize(ntpot) }),
    ...(harness === 'sglang' && { meanConcurrency: perS(latencySumMs / 1000) }),
  };
}

/**
 * One stage of a rate ladder: the requests it scheduled (a request the client's cap held back
 * belongs to the stage that scheduled it, as inference-perf keys a request by its stage), by
 * inference-perf's definitions.
 */
export interface StageSummary {
  stage: number;
  ratePerS: number;
  startMs: number;
  endMs: number;
  /** Requests the stage scheduled (sent then, or later when the client's cap held them). */
  sent: number;
  completed: number;
  timedOut: number;
  /** Failed otherwise (no replica, killed mid-stream, refused, unfinished). */
  failed: number;
  /** Requests scheduled per second over the stage's own duration. */
  achievedRatePerS: number;
  outputTokensPerS: number;
  ttftMs: Percentiles;
  tpotMs: Percentiles;
}

export function stageSummaries(
  stages: readonly { ratePerS: number; startMs: number; endMs: number }[],
  records: readonly HarnessRecord[],
  runEndMs: number,
): StageSummary[] {
  return stages.map((s, stage) => {
    const mine = records.filter((r) => {
      const atMs = r.scheduledMs ?? r.arrivalMs;
      return atMs >= s.startMs && atMs < s.endMs;
    });
    const byHarness = harnessSummary('inference-perf', mine, { startMs: s.startMs, runEndMs });
    return {
      stage,
      ratePerS: s.ratePerS,
      startMs: s.startMs,
      endMs: s.endMs,
      sent: mine.length,
      completed: byHarness.completed,
      timedOut: mine.filter((r) => r.error === 'timeout').length,
      failed: byHarness.failed - mine.filter((r) => r.error === 'timeout').length,
      achievedRatePerS: mine.length / ((s.endMs - s.startMs) / 1000),
      outputTokensPerS: byHarness.outputTokensPerS,
      ttftMs: byHarness.ttftMs,
      tpotMs: byHarness.tpotMs,
    };
  });
}
