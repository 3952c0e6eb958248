/**
 * Roofline cost model. Compute-bound work (prefill) costs 2 x active params FLOPs per token at
 * an MFU; memory-bound work (decode) reads the weights once per step plus every running
 * sequence's KV at an MBU. A mixed step takes the slower of the two, which is how one forward
 * pass over a flat batch behaves. Attention FLOPs are left out, as in the seeds' arithmetic.
 *
 * A spec with a `calibration` (from `kvroute calibrate`, see calibration.ts) keeps the same
 * formulas with measured coefficients: MFU becomes a function of the tokens in the step, MBU the
 * measured one, and every step adds a fixed overhead. Without one, the constants `mfu` and `mbu`
 * apply and nothing else changes. A calibration with a measured step table (stepTable.ts) times
 * every step from the table instead.
 */
import { type Calibration, curveMfu } from './calibration.ts';
import type { Dtype, GpuSpec, ModelSpec } from './catalog.ts';
import { tableStepMs } from './stepTable.ts';

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
  /** Measured coefficients that replace `mfu` and `mbu` (absent: the roofline defaults). */
  calibration?: Calibration;
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

/** MFU of a step that computes `tokens` tokens: the assumed constant, or the measured curve. */
export function mfuAt(spec: ReplicaSpec, tokens: number): number {
  return spec.calibration ? curveMfu(spec.calibration.curve, tokens) : spec.mfu;
}

/** MBU of a memory-bound step: the assumed constant, or the measured one. */
export const mbuOf = (spec: ReplicaSpec): number => spec.calibration?.curve.mbu ?? spec.mbu;

/** Replica FLOP/s delivered in a step of `tokens` tokens. */
const deliveredFlops = (spec: ReplicaSpec, tokens: number): number =>
  spec.tp * peakFlops(spec.gpu, spec.weightsDtype) * mfuAt(spec, tokens);

/** Replica HBM bytes/s delivered. */
const deliveredBytesPerS = (spec: ReplicaSpec): number =>
  spec.tp * spec.gpu.hbmBytesPerS * mbuOf(spec);

/**
 * Prefill cost of one token, in microseconds. Roofline: 2 x active params / delivered FLOP/s.
 * Calibrated: a prefill-only step of `tokensPerStep` tokens over its tokens, so the step's MFU,
 * its overhead and its weight read all count; left out, the step is unbounded (MFU at mfuMax).
 */
export function prefillUsPerToken(spec: ReplicaSpec, tokensPerStep?: number): number {
  const table = spec.calibration?.table;
  if (table) {
    // Unbounded: a step as large as the largest measured chunk.
    const tokens = tokensPerStep ?? table.prefillTokens[table.prefillTokens.length - 1]!;
    return (
      (tableStepMs(table, { prefillTokens: tokens, decodeTokens: 0, kvTokensRead: 0 }) / tokens) *
      1e3
    );
  }
  if (spec.calibration && tokensPerStep !== undefined) {
    return (stepMs(spec, tokensPerStep, weightBytes(spec)) / tokensPerStep) * 1e3;
  }
  return ((2 * spec.model.activeParams) / deliveredFlops(spec, Number.POSITIVE_INFINITY)) * 1e6;
}

/**
 * Decode step at `batch` sequences of `contextTokens` each, in milliseconds. Roofline (the
 * seed's formula): read all weights once plus every sequence's KV. Calibrated: the step the
 * engine times, `batch` tokens computed and those bytes read.
 */
export function decodeStepMs(spec: ReplicaSpec, batch: number, contextTokens: number): number {
  const table = spec.calibration?.table;
  if (table) {
    return tableStepMs(table, {
      prefillTokens: 0,
      decodeTokens: batch,
      kvTokensRead: batch * contextTokens,
    });
  }
  const bytes =
    weightBytes(spec) + batch * contextTokens * kvBytesPerToken(spec.model, spec.kvDtype);
  if (spec.calibration) return stepMs(spec, batch, bytes);
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
  /** Per-request tokens and contexts (a scheduler plan has them); only a step table reads them. */
  entries?: readonly { kind: 'decode' | 'prefill'; tokens: number; contextTokens: number }[];
  /** Prompt chunks that end their prompt (each samples a first token); only a step table reads it. */
  promptSamples?: number;
}

/**
 * Duration of one mixed step in ms: the slower of its compute time and its memory time, plus the
 * calibrated per-step overhead.
 */
export function mixedStepMs(spec: ReplicaSpec, work: StepWork): number {
  const tokens = work.prefillTokens + work.decodeTokens;
  if (tokens === 0) return 0;
  const table = spec.calibration?.table;
  if (table) return tableStepMs(table, work);
  return stepMs(spec, tokens, stepBytesRead(spec, work));
}

/** HBM bytes one step reads: the weights once, plus the KV its attention reads. */
export const stepBytesRead = (spec: ReplicaSpec, work: StepWork): number =>
  weightBytes(spec) + work.kvTokensRead * kvBytesPerToken(spec.model, spec.kvDtype);

/** A step computing `tokens` tokens and reading `bytesRead` bytes of HBM, in ms. */
function stepMs(spec: ReplicaSpec, tokens: number, bytesRead: number): number {
  const computeMs =
    tokens > 0 ? ((2 * spec.model.activeParams * tokens) / deliveredFlops(spec, tokens)) * 1e3 : 0;
  const memoryMs = (bytesRead / deliveredBytesPerS(spec)) * 1e3;
  const ms = Math.max(computeMs, memoryMs);
  return spec.calibration ? spec.calibration.curve.overheadMs + ms : ms;
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
