/**
 * Client-side measurements, in workload milliseconds (wall ms x speedup, so they compare with
 * the simulator's). TTFT and end to end run from the request's scheduled send time (open loop:
 * a late send is the client's queueing, not free time); TPOT = (last token - first token) /
 * (output tokens - 1); ITL is every gap between token chunks. As in the simulator, requests
 * that arrive before the warm-up are sent but not measured, and the hit rate is cached prompt
 * tokens / prompt tokens as the server reports them in `usage`.
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

export class Collector {
  readonly #speedup: number;
  readonly #warmupMs: number;
  readonly samples: BenchSample[] = [];
  readonly itlMs = new LogHistogram();
  readonly errorsByKind: Record<string, number> = {};
  /** First message seen per error kind (for the summary). */
  readonly errorDetails: Record<string, string> = {};
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

  onDone(req: PromptRequest, scheduledAt: number, out: StreamOutcome): void {
    if (out.error === 'cancelled') {
      this.cancelled++;
      return;
    }
    const first = out.tokenTimes[0];
    if (out.error === null && first === undefined) out.error = 'no-tokens';
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
      ttftMs: (first! - scheduledAt) * x,
      tpotMs: tokens > 1 ? ((last - first!) * x) / (tokens - 1) : Number.NaN,
      e2eMs: (out.endAt - scheduledAt) * x,
      promptTokens: out.promptTokens ?? a.promptLength,
      cachedTokens: out.cachedTokens,
    });
  }
}
