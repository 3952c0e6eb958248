/**
 * A closed loop's figures, as the harnesses report them (vLLM's `bench serve
 * --max-concurrency`, inference-perf, guidellm): output tokens per second and goodput, both over
 * the requests that ended in the measured window [warm-up, duration), when the loop holds its
 * `concurrency` requests in flight (the drain after `duration` is left out). When none ended in
 * that window (each request outlasting it), the figures are over every measured request that
 * ran, from the first one's start to the last one's end, and `over` says so. Pure: the log only.
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
  const inWindow = tally(
    log,
    window,
    (endMs) => endMs >= window.warmupMs && endMs < window.durationMs,
  );
  if (inWindow.ended > 0 || log.length === 0) {
    const seconds = Math.max(1e-9, (window.durationMs - window.warmupMs) / 1000);
    return figures(concurrency, inWindow, seconds, 'window');
  }
  // No request both started after the warm-up and ended before the duration (requests longer
  // than the window): the requests that did run, from the first one's start to the last end.
  const all = tally(log, window, () => true);
  let fromMs = Number.POSITIVE_INFINITY;
  let toMs = 0;
  for (let i = 0; i < log.length; i++) {
    fromMs = Math.min(fromMs, log.arrivalMs.get(i));
    toMs = Math.max(toMs, log.arrivalMs.get(i) + log.e2eMs.get(i));
  }
  return figures(concurrency, all, Math.max(1e-9, (toMs - fromMs) / 1000), 'measured-requests');
}

interface Tally {
  ended: number;
  tokens: number;
  good: number;
}

function tally(log: RequestLog, limits: RequestLimits, counts: (endMs: number) => boolean): Tally {
  const t: Tally = { ended: 0, tokens: 0, good: 0 };
  for (let i = 0; i < log.length; i++) {
    if (!counts(log.arrivalMs.get(i) + log.e2eMs.get(i))) continue;
    t.ended++;
    t.tokens += loggedOutputTokens(log, i);
    const tpotMs = log.tpotMs.get(i);
    const ttftOk = log.ttftMs.get(i) <= limits.ttftLimitMs(log.promptTokens.get(i));
    if (ttftOk && !(tpotMs > limits.tpotLimitMs)) t.good++;
  }
  return t;
}

function figures(
  concurrency: number,
  t: Tally,
  seconds: number,
  over: ClosedLoopResult['over'],
): ClosedLoopResult {
  return {
    concurrency,
    requestsPerS: t.ended / seconds,
    outputTokensPerS: t.tokens / seconds,
    goodputRps: t.good / seconds,
    over,
  };
}
