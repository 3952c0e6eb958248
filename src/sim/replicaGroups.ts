/**
 * A mixed fleet as plain data: groups of replicas, each of one GPU, TP degree and (optionally) a
 * calibrated profile, replicas numbered group after group. Every replica serves the same model
 * with the same block size, budget and sequence limit (the run's engine options); only the
 * hardware, and so the cost model, differs. The router gets each replica's speed (the prefill
 * time per token and the decode step model of its cost model), so delay-cost scores them in
 * milliseconds on one scale.
 */
import { type EngineOptions, makeEngineConfig } from '../engine/options.ts';
import type { EngineConfig } from '../engine/types.ts';
import type { CostProfile } from '../model/calibration.ts';
import { speedFigures } from '../model/replicaSpeed.ts';
import type { ReplicaSpeed } from '../router/replicaSpeed.ts';

export interface ReplicaGroup {
  /** Catalog GPU name. */
  gpu: string;
  /** GPUs per replica. */
  tp: number;
  /** Replicas in the group. */
  count: number;
  /** A calibrated profile (its curve for `tp`); absent: the roofline. */
  profile?: CostProfile;
  /** Where the profile came from, for labels. */
  profilePath?: string;
}

/** Replicas in the groups, together. */
export const groupReplicas = (groups: readonly ReplicaGroup[]): number =>
  groups.reduce((n, g) => n + g.count, 0);

/** GPUs in the groups, together. */
export const groupGpus = (groups: readonly ReplicaGroup[]): number =>
  groups.reduce((n, g) => n + g.count * g.tp, 0);

/** The engine options of every replica, in replica order: the run's, with its group's hardware. */
export function replicaEngineOptions(
  engine: EngineOptions,
  groups: readonly ReplicaGroup[],
): EngineOptions[] {
  const out: EngineOptions[] = [];
  for (const g of groups) {
    const { profile: _fleetProfile, ...rest } = engine;
    const options: EngineOptions = {
      ...rest,
      gpu: g.gpu,
      tp: g.tp,
      ...(g.profile && { profile: g.profile }),
    };
    for (let i = 0; i < g.count; i++) out.push(options);
  }
  return out;
}

/** The router's view of a replica's speed from its engine config (`model/replicaSpeed.ts`). */
export const replicaSpeed = (engine: EngineConfig): ReplicaSpeed =>
  speedFigures(engine.spec, engine.budgetTokens, engine.maxSeqs);

/** Each replica's speed, in replica order. */
export function replicaSpeeds(
  engine: EngineOptions,
  groups: readonly ReplicaGroup[],
): ReplicaSpeed[] {
  const speeds = new Map<EngineOptions, ReplicaSpeed>();
  return replicaEngineOptions(engine, groups).map((o) => {
    let s = speeds.get(o);
    if (s === undefined) speeds.set(o, (s = replicaSpeed(makeEngineConfig(o))));
    return s;
  });
}

/** `8 x h200 TP2 + 6 x h100-sxm TP4`. */
export function fleetLabel(groups: readonly ReplicaGroup[]): string {
  return groups
    .map((g) => `${g.count} x ${g.gpu} TP${g.tp}${g.profilePath ? ` (${g.profilePath})` : ''}`)
    .join(' + ');
}
