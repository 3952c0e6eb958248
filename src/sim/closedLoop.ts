/**
 * A closed loop's figures, as the harnesses report them (vLLM's `bench serve
 * --max-concurrency`, inference-perf, guidellm): output tokens per second and goodput, both over
 * the requests that ended in the measured window [warm-up, duration), when the loop holds its
 * `concurrency` requests in flight (the drain after `duration` is left out). Pure: the log only.
 */
import type { ClosedLoopResult } from '../results/result.ts';
import type { RequestLimits } from './admission.ts';
import type { RequestLog } from './metrics.ts';

/**
 * A logged request's output tokens: 1 + (e2e - TTFT) / TPOT, since TPOT is the time after the
 * first token over the tokens after it (NaN TPOT: one token).
 */
export function loggedOutputTokens(log: RequestLog, i: number): number {
  const tpotMs = log.tpotMs.get(i);
  if (Number.isNaN(tpotMs)) return 1;
  return 1 + Math.round((log.e2eMs.get(i) - log.ttftMs.get(i)) / tpotMs);
}

export function summarizeClosedLoop(
  concurrency: number,
  log: RequestLog,
  window: { warmupMs: number; durationMs: number } & RequestLimits,
): ClosedLoopResult {
  const seconds = Math.max(1e-9, (window.durationMs - window.warmupMs) / 1000);
  let tokens = 0;
  let good = 0;
  let ended = 0;
  for (let i = 0; i < log.length; i++) {
    const endMs = log.arrivalMs.get(i) + log.e2eMs.get(i);
    if (endMs < window.warmupMs || endMs >= window.durationMs) continue;
    ended++;
    tokens += loggedOutputTokens(log, i);
    const tpotMs = log.tpotMs.get(i);
    const ttftOk = log.ttftMs.get(i) <= window.ttftLimitMs(log.promptTokens.get(i));
    if (ttftOk && !(tpotMs > window.tpotLimitMs)) good++;
  }
  return {
    concurrency,
    requestsPerS: ended / seconds,
    outputTokensPerS: tokens / seconds,
    goodputRps: good / seconds,
  };
}
