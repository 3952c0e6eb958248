/**
 * A bench run's progress, as data: the fraction of its requests finished and a one-line status
 * (sent, in flight, done, errors, recent TTFT p50), polled on a timer and handed to whoever
 * renders it (`src/cli/progress.ts`).
 */
import { percentile } from '../results/stats.ts';
import type { Workload } from '../workload/types.ts';
import type { Collector } from './collect.ts';

/** Called on every poll: the fraction of expected requests finished and a short status. */
export type BenchProgress = (fraction: number, detail: string) => void;

const POLL_MS = 500;

/** Requests a run will send: the workload's arrivals, at most `limit`. */
export function expectedRequests(workload: Workload, limit = Number.POSITIVE_INFINITY): number {
  const it = workload.arrivals();
  let n = 0;
  while (n < limit && !it.next().done) n++;
  return n;
}

export function benchStatus(c: Collector, expected: number): { fraction: number; detail: string } {
  const recent = Float64Array.from(c.samples.slice(-200), (s) => s.ttftMs).sort();
  const p50 = percentile(recent, 0.5);
  const finished = c.completed + c.errors + c.cancelled;
  return {
    fraction: expected > 0 ? finished / expected : 0,
    detail:
      `sent ${c.arrived}/${expected}, in flight ${c.inFlight}, done ${c.completed}, ` +
      `errors ${c.errors}, TTFT p50 ${Number.isFinite(p50) ? p50.toFixed(0) : '-'} ms`,
  };
}

/** Polls the collector until the returned stop function is called (which polls a last time). */
export function watchProgress(
  c: Collector,
  expected: number,
  onProgress: BenchProgress,
): () => void {
  const poll = () => {
    const s = benchStatus(c, expected);
    onProgress(s.fraction, s.detail);
  };
  const timer = setInterval(poll, POLL_MS);
  timer.unref();
  return () => {
    clearInterval(timer);
    poll();
  };
}
