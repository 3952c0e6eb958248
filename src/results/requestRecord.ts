/**
 * One request of a run as `--requests-out FILE.jsonl` writes it, the same keys for
 * `kvroute sim` and `kvroute bench`, so a user can study a run (or a simulated run beside a live
 * one of the same seed: `id` is the arrival's index in the workload) in their own tools.
 * Times are workload milliseconds from the start of the run.
 */

export interface RequestRecord {
  /** The arrival's index in the workload (0-based): the same seed gives the same ids. */
  id: number;
  /** The policy (sim), the --label (bench, null without one). */
  policy: string | null;
  /** Replicas in the fleet (null when a live run does not know). */
  replicas: number | null;
  /** The customer (prefix group, conversation; a trace's first hash id), -1 when none. */
  customer: number;
  arrivalMs: number;
  /** Where it ran: the replica's index (sim), the gateway's `x-kvroute-replica` (bench). */
  replica: number | string | null;
  promptTokens: number;
  /** Prompt tokens served from the prefix cache; null when not known. */
  cachedTokens: number | null;
  /**
   * Sim only, not written out: tokens already computed when each prefill chunk after the first
   * started, summed (SGLang counts them as cached in its logs; src/scheduler/types.ts).
   */
  resumedPrefixTokens?: number;
  /** Sim only, not written out: with `--tenants`, the tenant's index and its flow-queue wait. */
  tenant?: number;
  queueWaitMs?: number;
  /** Arrival to first token; null without one. */
  ttftMs: number | null;
  /** Per output token after the first; null for one-token answers and failures. */
  tpotMs: number | null;
  /** When the request ended (its last token, or the failure); null when it never did. */
  endMs: number | null;
  /** The error kind when it failed (as in `errorsByKind`); absent when it completed. */
  error?: string;
  /**
   * When the workload scheduled it, where the client's in-flight cap held it back
   * (`kvroute sim --max-concurrency`; `arrivalMs` is then its send); absent when sent on time.
   */
  scheduledMs?: number;
  /** `kvroute sim --max-queue-ms`: the bound of this run (null: the unbounded run). */
  maxQueueMs?: number | null;
  /** `kvroute sim --max-ttft-ms`: the TTFT bound of this run (null: the unbounded run). */
  maxTtftMs?: number | null;
}

/** One JSONL line: floats rounded to µs, non-finite numbers as null, keys in a fixed order. */
export function requestLine(r: RequestRecord): string {
  const ms = (v: number | null): number | null =>
    v === null || !Number.isFinite(v) ? null : Math.round(v * 1000) / 1000;
  const out: Record<string, unknown> = {
    id: r.id,
    policy: r.policy,
    replicas: r.replicas,
    customer: r.customer,
    arrivalMs: ms(r.arrivalMs),
    replica: r.replica,
    promptTokens: r.promptTokens,
    cachedTokens: r.cachedTokens,
    ttftMs: ms(r.ttftMs),
    tpotMs: ms(r.tpotMs),
    endMs: ms(r.endMs),
  };
  if (r.error !== undefined) out.error = r.error;
  if (r.scheduledMs !== undefined) out.scheduledMs = ms(r.scheduledMs);
  if (r.maxQueueMs !== undefined) out.maxQueueMs = r.maxQueueMs;
  if (r.maxTtftMs !== undefined) out.maxTtftMs = r.maxTtftMs;
  return JSON.stringify(out);
}
