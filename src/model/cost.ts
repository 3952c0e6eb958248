/**
 * Roofline cost model. Compute-bound work (prefill) costs 2 x active params FLOPs per token at
 * an MFU; memory-bound work (decode) reads the weights once per step plus every running
 * sequence's KV at an MBU. A mixed step takes the slower of the two, which is how one forward
 * pass over a flat batch behaves. Attention FLOPs are left out, as in the seeds' arithmetic.
 */
import type { Dtype, GpuSpec, ModelSpec } from './catalog.ts';

export interface ReplicaSpec {
  model: ModelSpec;
  gpu: GpuSpec;
  /** Tensor-parallel degree: GPUs per replica. */
  tp: number;
  weightsDtype: Dtype;
  kvDtype: Dtype;
  /** Model FLOP utilization assumed for prefill, 0..1. */
  mfu: number;
  /** Memory bandwidth utilization assumed for decode, 0..1. */
  mbu: number;
  /** Fraction of HBM the engine may use (vLLM's gpu_memory_utilization). */
  memoryUtilization: number;
  /** Activation / workspace memory kept back on each GPU. */
  activationReserveBytes: number;
}

export const DEFAULT_MEMORY_UTILIZATION = 0.92;
export const DEFAULT_ACTIVATION_RESERVE_BYTES = 3e9;

export const bytesPerElement = (dtype: Dtype): number => (dtype === 'fp8' ? 1 : 2);

/** Peak dense FLOP/s of one GPU for math in `dtype`; FP8 falls back to BF16 where unsupported. */
export function peakFlops(gpu: GpuSpec, dtype: Dtype): number {
  return dtype === 'fp8' ? (gpu.fp8Flops ?? gpu.bf16Flops) : gpu.bf16Flops;
}

export const weightBytes = (spec: ReplicaSpec): number =>
  spec.model.totalParams * bytesPerElement(spec.weightsDtype);

/** KV bytes per token: K and V, every layer, every KV head. */
export function kvBytesPerToken(model: ModelSpec, kvDtype: Dtype): number {
  return 2 * model.layers * model.kvHeads * model.headDim * bytesPerElement(kvDtype);
}

/** Replica FLOP/s delivered at the assumed MFU. */
const deliveredFlops = (spec: ReplicaSpec): number =>
  spec.tp * peakFlops(spec.gpu, spec.weightsDtype) * spec.mfu;

/** Replica HBM bytes/s delivered at the assumed MBU. */
const deliveredBytesPerS = (spec: ReplicaSpec): number =>
  spec.tp * spec.gpu.hbmBytesPerS * spec.mbu;

/** Prefill cost of one token: 2 x active params / delivered FLOP/s, in microseconds. */
export function prefillUsPerToken(spec: ReplicaSpec): number {
  return ((2 * spec.model.activeParams) / deliveredFlops(spec)) * 1e6;
}

/**
 * Decode step at `batch` sequences of `contextTokens` each: read all weights once plus every
 * sequence's KV, in milliseconds.
 */
export function decodeStepMs(spec: ReplicaSpec, batch: number, contextTokens: number): number {
  const bytes =
    weightBytes(spec) + batch * contextTokens * kvBytesPerToken(spec.model, spec.kvDtype);
  return (bytes / deliveredBytesPerS(spec)) * 1e3;
}

/**
 * Tokens of KV the replica's pool holds: HBM the engine may use on each GPU, less the
 * activation reserve, times TP, less the weights, over KV bytes per token.
 */
export function kvPoolTokens(spec: ReplicaSpec): number {
  const usablePerGpu = spec.gpu.hbmBytes * spec.memoryUtilization - spec.activationReserveBytes;
  // Rounded, not floored: the formula lands within a hundredth of a token of an integer on the
  // seed's hardware (558,135.98), and the engine floors to whole blocks anyway.
  return Math.round(
    (spec.tp * usablePerGpu - weightBytes(spec)) / kvBytesPerToken(spec.model, spec.kvDtype),
  );
}

/** What one engine step computes: a flat batch of prefill and decode tokens. */
export interface StepWork {
  /** Prompt tokens computed in this step (all prefill chunks). */
  prefillTokens: number;
  /** Decode tokens (one per running decode). */
  decodeTokens: number;
  /** KV tokens read by the step's attention: the decodes' contexts, summed. */
  kvTokensRead: number;
}

/** Duration of one mixed step in ms: the slower of its compute time and its memory time. */
export function mixedStepMs(spec: ReplicaSpec, work: StepWork): number {
  const tokens = work.prefillTokens + work.decodeTokens;
  if (tokens === 0) return 0;
  const computeMs = ((2 * spec.model.activeParams * tokens) / deliveredFlops(spec)) * 1e3;
  const bytes = weightBytes(spec) + work.kvTokensRead * kvBytesPerToken(spec.model, spec.kvDtype);
  const memoryMs = (bytes / deliveredBytesPerS(spec)) * 1e3;
  return Math.max(computeMs, memoryMs);
}

/** Why a replica spec cannot run, or null when it can. */
export function replicaSpecProblem(spec: ReplicaSpec): string | null {
  if (!Number.isInteger(spec.tp) || spec.tp < 1 || (spec.tp & (spec.tp - 1)) !== 0) {
    return `--tp must be a power of two (1, 2, 4, 8, ...), got ${spec.tp}`;
  }
  if (spec.model.attentionHeads % spec.tp !== 0) {
    return `--tp ${spec.tp} does not divide ${spec.model.displayName}'s ${spec.model.attentionHeads} attention heads`;
  }
  const pool = kvPoolTokens(spec);
  if (pool < 1) {
    const needGb = (weightBytes(spec) / 1e9).toFixed(1);
    return `--tp ${spec.tp} does not fit ${spec.model.displayName}: ${needGb} GB of ${spec.weightsDtype} weights leave no KV pool on ${spec.tp} x ${spec.gpu.displayName}`;
  }
  return null;
}
