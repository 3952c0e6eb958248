import { type CostProfile, calibrationFor } from './calibration.ts';
import { type Dtype, gpuByName, modelByName } from './catalog.ts';
import {
  DEFAULT_ACTIVATION_RESERVE_BYTES,
  DEFAULT_MEMORY_UTILIZATION,
  type ReplicaSpec,
} from './cost.ts';

export interface ReplicaSpecInput {
  model?: string;
  gpu?: string;
  tp?: number;
  weightsDtype?: Dtype;
  kvDtype?: Dtype;
  mfu?: number;
  mbu?: number;
  memoryUtilization?: number;
  activationReserveBytes?: number;
  /** A calibrated profile: its curve for `tp` replaces `mfu` and `mbu` (ProfileError if none). */
  profile?: CostProfile;
}

/** The router seed's replica: Llama 3.3 70B, FP8 weights, BF16 KV, TP=2 H200, 50 % MFU, 75 % MBU. */
export const SEED_REPLICA: Required<Omit<ReplicaSpecInput, 'profile'>> = {
  model: 'llama-3.3-70b',
  gpu: 'h200',
  tp: 2,
  weightsDtype: 'fp8',
  kvDtype: 'bf16',
  mfu: 0.5,
  mbu: 0.75,
  memoryUtilization: DEFAULT_MEMORY_UTILIZATION,
  activationReserveBytes: DEFAULT_ACTIVATION_RESERVE_BYTES,
};

/** Builds a replica spec from catalog names, with the router seed's values as defaults. */
export function makeReplicaSpec(input: ReplicaSpecInput = {}): ReplicaSpec {
  const { profile, ...rest } = input;
  const v = { ...SEED_REPLICA, ...stripUndefined(rest) };
  return {
    model: modelByName(v.model),
    gpu: gpuByName(v.gpu),
    tp: v.tp,
    weightsDtype: v.weightsDtype,
    kvDtype: v.kvDtype,
    mfu: v.mfu,
    mbu: v.mbu,
    memoryUtilization: v.memoryUtilization,
    activationReserveBytes: v.activationReserveBytes,
    ...(profile && { calibration: calibrationFor(profile, v.tp) }),
  };
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
