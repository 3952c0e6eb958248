/**
 * A replica's speed as the router's policies take it (`src/router/replicaSpeed.ts`, the same
 * shape): prefill ms per token at the engine's budget, and the decode step as base + slope over
 * the KV it reads, from two points of the cost model at the engine's batch limit (exact for the
 * roofline, a chord for a measured table).
 */
import { decodeStepMs, prefillUsPerToken, type ReplicaSpec } from './cost.ts';

export interface SpeedFigures {
  prefillMsPerToken: number;
  decodeBaseMs: number;
  decodeMsPerKvToken: number;
}

/** The contexts the decode slope is measured between (the seed's 8,150 tokens lies between). */
const SLOPE_CONTEXTS = [1_000, 8_000] as const;

export function speedFigures(spec: ReplicaSpec, budgetTokens: number, batch: number): SpeedFigures {
  const [c1, c2] = SLOPE_CONTEXTS;
  const s1 = decodeStepMs(spec, batch, c1);
  const s2 = decodeStepMs(spec, batch, c2);
  const slope = (s2 - s1) / (batch * (c2 - c1));
  return {
    prefillMsPerToken: prefillUsPerToken(spec, budgetTokens) / 1000,
    decodeBaseMs: Math.max(0, s1 - batch * c1 * slope),
    decodeMsPerKvToken: slope,
  };
}
