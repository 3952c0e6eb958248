/** Scheduler config: defaults and validation (errors carry ERR_CONFIG). */
import type { ChunkRules } from './chunks.ts';
import { EngineError } from './errors.ts';
import {
  BATCH_SHAPES,
  type BatchShape,
  KV_POLICY_NAMES,
  type KvPolicyName,
  SCHEDULE_POLICIES,
  type SchedulePolicy,
  type SchedulerConfig,
} from './types.ts';

export const DEFAULT_WATERMARK = 0.01;
export const DEFAULT_PRIORITY_AGE_MS = 10_000;
/**
 * LPM sorts the waiting list only while it holds at most this many requests: "Turn off the
 * expensive prefix matching and sorting when the #queue is large" (`len(waiting_queue) > 128`
 * falls back to fcfs; python/sglang/srt/managers/schedule_policy.py, v0.4).
 */
export const LPM_MAX_QUEUE = 128;

export interface ResolvedSchedulerConfig extends ChunkRules {
  budgetTokens: number;
  maxSeqs: number;
  kvPolicy: KvPolicyName;
  rotateDecodes: boolean;
  prefetchRunning: boolean;
  maxPartialPrefills: number;
  watermark: number;
  priorityAgeMs: number;
  /** Infinity when no limit was set. */
  maxLoras: number;
  batchShape: BatchShape;
  /** null: kvroute's priority queue. */
  schedulePolicy: SchedulePolicy | null;
  deferPrefixInsert: boolean;
}

function fail(message: string): never {
  throw new EngineError('ERR_CONFIG', message);
}

function positiveInt(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) fail(`${name} must be an integer >= 1, got ${value}`);
  return value;
}

/** Fills defaults and checks every field; `blockSize` is the pool's. */
export function resolveSchedulerConfig(
  config: SchedulerConfig,
  blockSize: number,
): ResolvedSchedulerConfig {
  const budgetTokens = positiveInt('budgetTokens', config.budgetTokens);
  const maxSeqs = positiveInt('maxSeqs', config.maxSeqs);
  if (!(KV_POLICY_NAMES as readonly string[]).includes(config.kvPolicy)) {
    fail(`kvPolicy must be one of ${KV_POLICY_NAMES.join(', ')}, got ${String(config.kvPolicy)}`);
  }
  const longPrefillThreshold = config.longPrefillThreshold
    ? positiveInt('longPrefillThreshold', config.longPrefillThreshold)
    : Number.POSITIVE_INFINITY;
  const maxPartialPrefills =
    config.maxPartialPrefills === undefined
      ? Number.POSITIVE_INFINITY
      : positiveInt('maxPartialPrefills', config.maxPartialPrefills);
  const watermark = config.watermark ?? DEFAULT_WATERMARK;
  if (!(watermark >= 0 && watermark < 1)) fail(`watermark must be in [0, 1), got ${watermark}`);
  const priorityAgeMs = config.priorityAgeMs ?? DEFAULT_PRIORITY_AGE_MS;
  if (!(Number.isFinite(priorityAgeMs) && priorityAgeMs >= 0)) {
    fail(`priorityAgeMs must be a finite number >= 0, got ${priorityAgeMs}`);
  }
  const maxLoras =
    config.maxLoras === undefined
      ? Number.POSITIVE_INFINITY
      : positiveInt('maxLoras', config.maxLoras);
  const batchShape = config.batchShape ?? 'mixed';
  if (!(BATCH_SHAPES as readonly string[]).includes(batchShape)) {
    fail(`batchShape must be one of ${BATCH_SHAPES.join(', ')}, got ${String(batchShape)}`);
  }
  const schedulePolicy = config.schedulePolicy ?? null;
  if (
    schedulePolicy !== null &&
    !(SCHEDULE_POLICIES as readonly string[]).includes(schedulePolicy)
  ) {
    fail(
      `schedulePolicy must be one of ${SCHEDULE_POLICIES.join(', ')}, got ${String(schedulePolicy)}`,
    );
  }
  const align = config.alignChunksToBlocks ?? false;
  // Aligned chunks shorter than a block round to 0: the budget and cap must hold one block.
  if (align && Math.min(budgetTokens, longPrefillThreshold) < blockSize) {
    fail(
      `alignChunksToBlocks needs budgetTokens and longPrefillThreshold >= blockSize (${blockSize})`,
    );
  }
  return {
    budgetTokens,
    maxSeqs,
    kvPolicy: config.kvPolicy,
    rotateDecodes: config.rotateDecodes ?? false,
    prefetchRunning: config.prefetchRunning ?? false,
    longPrefillThreshold,
    alignTokens: align ? blockSize : 1,
    maxPartialPrefills,
    watermark,
    priorityAgeMs,
    maxLoras,
    batchShape,
    schedulePolicy,
    deferPrefixInsert: config.deferPrefixInsert ?? false,
  };
}
