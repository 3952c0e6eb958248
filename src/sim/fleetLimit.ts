/**
 * Why a GPU x TP candidate meets the SLO at no searched replica count, named by its limit:
 *
 * - kv-fit: the longest request (prompt + output tokens) is larger than one replica's KV pool,
 *   so it can never be admitted;
 * - tpot-floor: a decode step with one sequence of the workload's mean context already takes
 *   longer than the TPOT target, so no replica count brings TPOT under it;
 * - prefill-floor: too many requests miss their TTFT limit even alone on an idle replica that
 *   caches every earlier prompt (`feasibility.ts`'s out-of-reach);
 * - too-few-measured: under 100 measured requests, the p99 is their maximum;
 * - max-replicas: none of these, the search ran out of counts (raise --max-replicas).
 *
 * The first that applies is the limit. Pure: the workload and cost model only.
 */
import { makeEngineConfig } from '../engine/options.ts';
import { decodeStepMs, kvPoolTokens } from '../model/cost.ts';
import type { SearchUnmet } from '../results/result.ts';
import { makeWorkload, type SimConfig } from './run.ts';

export type FleetLimitKind =
  | 'kv-fit'
  | 'tpot-floor'
  | 'prefill-floor'
  | 'too-few-measured'
  | 'max-replicas';

export interface FleetLimit {
  kind: FleetLimitKind;
  /** One line with the figures behind it. */
  detail: string;
}

export interface WorkloadShape {
  /** Most tokens one request holds in KV: prompt + output. */
  longestRequestTokens: number;
  /** Mean context of a decode step: prompt + half the output, over requests. */
  meanContextTokens: number;
}

/** The workload's shape as the limits need it (every arrival, measured or not). */
export function workloadShape(config: SimConfig): WorkloadShape {
  const it = makeWorkload(config).arrivals();
  let longest = 0;
  let contexts = 0;
  let n = 0;
  for (let a = it.next(); !a.done; a = it.next()) {
    const { promptLength, outputTokens } = a.value;
    longest = Math.max(longest, promptLength + outputTokens);
    contexts += promptLength + outputTokens / 2;
    n++;
  }
  return { longestRequestTokens: longest, meanContextTokens: n === 0 ? 0 : contexts / n };
}

export function fleetLimit(
  config: SimConfig,
  shape: WorkloadShape,
  unmet: SearchUnmet | null,
): FleetLimit {
  const engine = makeEngineConfig(config.engine);
  const fmt = (x: number, digits = 0) =>
    x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
  const pool =
    engine.kvBlocks !== undefined ? engine.kvBlocks * engine.blockSize : kvPoolTokens(engine.spec);
  if (shape.longestRequestTokens > pool) {
    return {
      kind: 'kv-fit',
      detail: `KV fit: the longest request holds ${fmt(shape.longestRequestTokens)} tokens, one replica's pool ${fmt(pool)}`,
    };
  }
  const stepMs = decodeStepMs(engine.spec, 1, shape.meanContextTokens);
  if (stepMs > config.slo.tpotP99Ms) {
    return {
      kind: 'tpot-floor',
      detail: `TPOT floor: one sequence's decode step takes ${fmt(stepMs, 1)} ms at ${fmt(shape.meanContextTokens)} tokens of context, over the ${fmt(config.slo.tpotP99Ms)} ms target`,
    };
  }
  if (unmet?.reason === 'out-of-reach') {
    return {
      kind: 'prefill-floor',
      detail: `prefill floor: ${fmt(unmet.outOfReach)} of ${fmt(unmet.measured)} measured requests miss the TTFT target even alone on an idle replica`,
    };
  }
  if (unmet?.reason === 'too-few-measured') {
    return {
      kind: 'too-few-measured',
      detail: `too few measured requests (${fmt(unmet.measured)}) for a p99: lengthen --duration`,
    };
  }
  return {
    kind: 'max-replicas',
    detail: `not met up to ${fmt(unmet?.maxReplicas ?? Number.NaN)} replicas (--max-replicas)`,
  };
}
