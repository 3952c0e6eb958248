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
}

/** The router seed's replica: Llama 3.3 70B, FP8 weights, BF16 KV, TP=2 H200, 50 % MFU, 75 % MBU. */
export const SEED_REPLICA: Required<ReplicaSpecInput> = {
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
  const v = { ...SEED_REPLICA, ...stripUndefined(input) };
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
  };
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
