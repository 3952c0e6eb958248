/**
 * Client-side measurements, in workload milliseconds (wall ms x speedup, so they compare with
 * the simulator's). TTFT and end to end run from the request's scheduled send time (open loop:
 * a late send is the client's queueing, not free time); TPOT = (last token - first token) /
 * (output tokens - 1); ITL is every gap between token chunks. As in the simulator, requests
 * that arrive before the warm-up are sent but not measured, and the hit rate is cached prompt
 * tokens / prompt tokens as the server reports them in `usage`. Every request, warm-up and
 * failures included, is also kept as a record (`requests`) for `--requests-out`, the report's
 * charts over time and the warm-fleet check.
 */
import { LogHistogram } from '../results/stats.ts';
import type { PromptRequest } from './prompts.ts';
import type { StreamOutcome } from './sse.ts';

export interface BenchSample {
  arrivalMs: number;
  customer: number;
  ttftMs: number;
  /** NaN for single-token answers. */
  tpotMs: number;
  e2eMs: number;
  promptTokens: number;
  cachedTokens: number | null;
}

/** One request's outcome from the client, in workload ms from the start of the run. */
export interface BenchRequest {
  index: number;
  customer: number;
  arrivalMs: number;
  /** The gateway's `x-kvroute-replica`; null without one. */
  replica: string | null;
  promptTokens: number;
  cachedTokens: number | null;
  ttftMs: number | null;
  tpotMs: number | null;
  endMs: number;
  error: string | null;
}

export class Collector {
  readonly #speedup: number;
  readonly #warmupMs: number;
  readonly samples: BenchSample[] = [];
  readonly itlMs = new LogHistogram();
  readonly errorsByKind: Record<string, number> = {};
  /** First message seen per error kind (for the summary). */
  readonly errorDetails: Record<string, string> = {};
  /** Every request that ended, in the order they ended. */
  readonly requests: BenchRequest[] = [];
  arrived = 0;
  completed = 0;
  cancelled = 0;
  /** Prompts the server counted differently from the workload (should stay 0). */
  promptMismatches = 0;

  constructor(speedup: number, warmupMs: number) {
    this.#speedup = speedup;
    this.#warmupMs = warmupMs;
  }

  get errors(): number {
    let n = 0;
    for (const v of Object.values(this.errorsByKind)) n += v;
    return n;
  }

  get inFlight(): number {
    return this.arrived - this.completed - this.errors - this.cancelled;
  }

  onSent(): void {
    this.arrived++;
  }

  /**
   * `timedFrom`: where its latencies start, its scheduled time unless the client times from
   * the send (`--max-concurrency`); its end is on the workload clock either way.
   */
  onDone(
    req: PromptRequest,
    scheduledAt: number,
    out: StreamOutcome,
    timedFrom: number = scheduledAt,
  ): void {
    const first = out.tokenTimes[0];
    if (out.error === null && first === undefined) out.error = 'no-tokens';
    this.requests.push(this.#record(req, scheduledAt, timedFrom, out));
    if (out.error === 'cancelled') {
      this.cancelled++;
      return;
    }
    if (out.error !== null) {
      this.errorsByKind[out.error] = (this.errorsByKind[out.error] ?? 0) + 1;
      if (out.detail !== undefined) this.errorDetails[out.error] ??= out.detail;
      return;
    }
    this.completed++;
    const a = req.arrival;
    if (out.promptTokens !== null && out.promptTokens !== a.promptLength) this.promptMismatches++;
    if (a.atMs < this.#warmupMs) return;
    const x = this.#speedup;
    const times = out.tokenTimes;
    const last = times[times.length - 1]!;
    const tokens = out.completionTokens ?? times.length;
    for (let i = 1; i < times.length; i++) this.itlMs.add((times[i]! - times[i - 1]!) * x);
    this.samples.push({
      arrivalMs: a.atMs,
      customer: a.customer,
      ttftMs: (first! - timedFrom) * x,
      tpotMs: tokens > 1 ? ((last - first!) * x) / (tokens - 1) : Number.NaN,
      e2eMs: (out.endAt - timedFrom) * x,
      promptTokens: out.promptTokens ?? a.promptLength,
      cachedTokens: out.cachedTokens,
    });
  }

  #record(
    req: PromptRequest,
    scheduledAt: number,
    timedFrom: number,
    out: StreamOutcome,
  ): BenchRequest {
    const x = this.#speedup;
    const a = req.arrival;
    const first = out.tokenTimes[0];
    const last = out.tokenTimes.at(-1);
    const tokens = out.completionTokens ?? out.tokenTimes.length;
    const ok = out.error === null;
    return {
      index: req.index,
      customer: a.customer,
      arrivalMs: a.atMs,
      replica: out.replica,
      promptTokens: out.promptTokens ?? a.promptLength,
      cachedTokens: out.cachedTokens,
      ttftMs: first === undefined ? null : (first - timedFrom) * x,
      tpotMs: ok && tokens > 1 ? ((last! - first!) * x) / (tokens - 1) : null,
      endMs: a.atMs + (out.endAt - scheduledAt) * x,
      error: out.error,
    };
  }
}
