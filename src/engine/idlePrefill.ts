/**
 * How long an idle engine takes to a request's first token: its calibrated request overhead
 * (none without a profile that measured one) and the steps it would run for that prompt alone, chunked by the token budget exactly as the scheduler chunks it (long-prefill cap,
 * block alignment), each timed by the cost model's mixed step (a chunk reads the KV of the tokens
 * before it). It is the reference of the slowdown SLO (`src/results/slo.ts`): a request's TTFT
 * over the time it needs with the replica to itself.
 */
import { mixedStepMs } from '../model/cost.ts';
import { prefillChunkTokens } from '../scheduler/chunks.ts';
import { resolveSchedulerConfig } from '../scheduler/config.ts';
import type { EngineConfig } from './types.ts';

/**
 * Milliseconds from arrival to the first token of a `promptTokens` prompt on an idle engine,
 * with `cachedTokens` of it already cached (rounded down to whole blocks, and at least one token
 * left to compute, as the scheduler's prefix lookup does). LoRA load time is left out.
 */
export function idlePrefillMs(
  config: EngineConfig,
  promptTokens: number,
  cachedTokens = 0,
): number {
  const rules = resolveSchedulerConfig(config, config.blockSize);
  return stepsToFirstToken(config, rules, promptTokens, cachedTokens);
}

/** `idlePrefillMs` for one engine config, memoized: the simulator asks once per request. */
export function makeIdlePrefill(
  config: EngineConfig,
): (promptTokens: number, cachedTokens?: number) => number {
  const rules = resolveSchedulerConfig(config, config.blockSize);
  const known = new Map<number, number>();
  return (promptTokens, cachedTokens = 0) => {
    // Exact in a double for prompts under 2^37 tokens.
    const key = promptTokens * 65_536 + Math.floor(cachedTokens / config.blockSize);
    let ms = known.get(key);
    if (ms === undefined) {
      ms = stepsToFirstToken(config, rules, promptTokens, cachedTokens);
      known.set(key, ms);
    }
    return ms;
  };
}

function stepsToFirstToken(
  config: EngineConfig,
  rules: ReturnType<typeof resolveSchedulerConfig>,
  promptTokens: number,
  cachedTokens: number,
): number {
  const bs = config.blockSize;
  const maxCachedBlocks = Math.floor((promptTokens - 1) / bs);
  let computed = Math.min(Math.floor(cachedTokens / bs), Math.max(0, maxCachedBlocks)) * bs;
  const c = config.spec.calibration;
  let ms = (c?.requestOverheadMs ?? 0) + (c?.requestMsPerPromptToken ?? 0) * promptTokens;
  while (computed < promptTokens) {
    const tokens = prefillChunkTokens(computed, promptTokens, rules.budgetTokens, rules);
    if (tokens <= 0) break;
    ms += mixedStepMs(config.spec, {
      prefillTokens: tokens,
      decodeTokens: 0,
      kvTokensRead: computed,
    });
    computed += tokens;
  }
  return ms;
}
