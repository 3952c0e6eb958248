/**
 * The fleet-wide admission bound in the simulator: each arrival is checked with the gateway's
 * own rule (`src/admission/queueBound.ts`) against the fleet's queues (uncached prompt tokens
 * routed to a live replica whose first token has not come back, the ledger's quantity), priced
 * at the simulated model's prefill cost per token. A refused request is counted, not served.
 *
 * Goodput is what the bound is for: requests that met the SLO (TTFT and TPOT under their p99
 * targets) per second of the measured window. Without a bound, overload makes every queue grow
 * and most requests miss; with one, the excess is refused and the rest are served in time.
 */
import { type QueueView, queueBoundVerdict } from '../admission/queueBound.ts';
import { ttftBoundVerdict } from '../admission/ttftBound.ts';
import type { AdmissionResult } from '../results/result.ts';
import type { RequestLog } from './metrics.ts';

export interface SimAdmission {
  /** The bound in ms of modelled prefill; null: none (the run is measured for comparison). */
  maxQueueMs: number | null;
  /** The TTFT bound at the chosen replica (`ttftBound.ts`); null or absent: none. */
  maxTtftMs?: number | null;
}

/** The fleet's admission hook for a bound, or undefined when there is none. */
export function queueGate(
  admission: SimAdmission,
  prefillUsPerToken: number,
): ((replicas: readonly QueueView[]) => boolean) | undefined {
  const { maxQueueMs } = admission;
  if (maxQueueMs === null) return undefined;
  return (replicas) => queueBoundVerdict(replicas, prefillUsPerToken, maxQueueMs).admitted;
}

/** The fleet's hook after routing for a TTFT bound, or undefined when there is none. */
export function ttftGate(
  admission: SimAdmission,
  prefillUsPerToken: number,
): ((queuedPromptTokens: number, uncachedTokens: number) => boolean) | undefined {
  const maxTtftMs = admission.maxTtftMs ?? null;
  if (maxTtftMs === null) return undefined;
  return (queued, uncached) =>
    ttftBoundVerdict(queued, uncached, prefillUsPerToken, maxTtftMs).admitted;
}

/** The per-request limits of an SLO: TTFT by prompt length (`ttftLimitMs` in results/slo.ts). */
export interface RequestLimits {
  ttftLimitMs: (promptTokens: number) => number;
  tpotLimitMs: number;
}

/** Measured requests in `log` that met both SLO targets. */
export function requestsMeetingSlo(log: RequestLog, limits: RequestLimits): number {
  let met = 0;
  for (let i = 0; i < log.length; i++) {
    const tpotMs = log.tpotMs.get(i);
    const ttftOk = log.ttftMs.get(i) <= limits.ttftLimitMs(log.promptTokens.get(i));
    if (ttftOk && !(tpotMs > limits.tpotLimitMs)) met++;
  }
  return met;
}

export function summarizeAdmission(
  admission: SimAdmission,
  outcome: { log: RequestLog; rejectedMeasured: number; arrivedMeasured: number },
  window: { durationMs: number; warmupMs: number } & RequestLimits,
): AdmissionResult {
  const seconds = Math.max(1e-9, (window.durationMs - window.warmupMs) / 1000);
  return {
    maxQueueMs: admission.maxQueueMs,
    ...(admission.maxTtftMs !== undefined && { maxTtftMs: admission.maxTtftMs }),
    rejected: outcome.rejectedMeasured,
    goodputRps: requestsMeetingSlo(outcome.log, window) / seconds,
    offeredRps: outcome.arrivedMeasured / seconds,
  };
}
