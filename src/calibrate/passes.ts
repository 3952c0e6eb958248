/**
 * Whether an engine runs each sequence of a step as a forward pass of its own, from the decode
 * probes: a batch of b decodes that takes about b times one decode (at least `SHARE` x b) is not
 * batched at all, so a step of several prompt chunks costs each chunk alone, summed (the step
 * table's `perSequencePasses`). llama.cpp with a KV stream per sequence runs so (4 decodes took
 * 4.8 x one on the tiny model); vLLM on a GPU reads the weights once for the whole batch (about
 * 1 x). llama.cpp does batch sequences with consecutive ids, so the decode probe can also come
 * out under the share (2.7x in one run at load 30, 4.1 and under 3 in two quiet ones): a decision
 * from this proxy is not stable across runs. Pure: no I/O.
 */
import type { StepWork } from '../model/cost.ts';

/** b decodes at least this share of b x one decode: one pass per sequence. */
export const PER_SEQUENCE_SHARE = 0.75;

/** A decode-only measurement: its batch and its step time. */
export interface DecodePoint {
  steps: readonly StepWork[];
  measuredMs: number;
}

/**
 * true when the largest decode batch measured costs >= PER_SEQUENCE_SHARE x batch x the median
 * one-sequence decode; false when it costs less, or when no batch of 2 or more, or no single
 * decode, was measured.
 */
export function perSequencePasses(points: readonly DecodePoint[]): boolean {
  const decodes = points.filter(
    (p) => p.steps.length === 1 && p.steps[0]!.prefillTokens === 0 && p.steps[0]!.decodeTokens > 0,
  );
  const ones = decodes
    .filter((p) => p.steps[0]!.decodeTokens === 1)
    .map((p) => p.measuredMs)
    .sort((a, b) => a - b);
  const batched = decodes.filter((p) => p.steps[0]!.decodeTokens > 1);
  if (ones.length === 0 || batched.length === 0) return false;
  const one = ones[Math.floor((ones.length - 1) / 2)]!;
  const largest = Math.max(...batched.map((p) => p.steps[0]!.decodeTokens));
  const times = batched
    .filter((p) => p.steps[0]!.decodeTokens === largest)
    .map((p) => p.measuredMs)
    .sort((a, b) => a - b);
  const batchMs = times[Math.floor((times.length - 1) / 2)]!;
  return batchMs >= PER_SEQUENCE_SHARE * largest * one;
}
