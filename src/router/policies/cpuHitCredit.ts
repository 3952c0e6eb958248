/**
 * What a CPU-tier hit costs the cost rules (`cost`, `delay-cost`), in prefill tokens: the
 * reload time of its blocks over the replica's prefill time per token.
 *
 *   reload(r) [tokens] = cpuCachedTokens(r) x reloadUsPerToken / prefillUsPerToken
 *   reloadUsPerToken   = kvBytesPerToken / PCIe bytes per µs (5.2 µs for the seed replica's
 *                        327,680 B/token over PCIe 5.0 x16, 63 GB/s: DEFAULT_CPU_RELOAD_US_PER_TOKEN)
 *
 * So a CPU hit sits between a GPU hit (0) and a miss (1 token per token): 0.073 for the seed
 * replica (5.2 / 71.3). A policy adds it to uncached(r). No CPU tier, or none indexed: 0.
 */
import { DEFAULT_CPU_RELOAD_US_PER_TOKEN, DEFAULT_PREFILL_US_PER_TOKEN } from '../defaults.ts';

export interface CpuHitOptions {
  /** Time to reload one token's KV from a replica's CPU tier, µs. */
  cpuReloadUsPerToken?: number;
  /** Prefill time per prompt token on a replica, µs (default DEFAULT_PREFILL_US_PER_TOKEN). */
  prefillUsPerToken?: number;
}

/** Tokens a prefill of `cpuCachedTokens` reloaded tokens is worth. */
export function cpuReloadTokens(
  cpuCachedTokens: number,
  reloadUsPerToken: number = DEFAULT_CPU_RELOAD_US_PER_TOKEN,
  prefillUsPerToken: number = DEFAULT_PREFILL_US_PER_TOKEN,
): number {
  if (cpuCachedTokens <= 0) return 0;
  return (cpuCachedTokens * reloadUsPerToken) / prefillUsPerToken;
}
