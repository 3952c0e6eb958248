/**
 * A llama.cpp backend's host prompt cache (llama-server's `--cache-ram`) in blocks, for the
 * router's slot model (src/router/index/slotCache.ts `hostBlocks`). Its bound is in bytes upstream
 * (tools/server/server-task.cpp, `server_prompt_cache::update`: the oldest states go while the
 * cache passes `--cache-ram` MiB), and llama-server serves neither that bound nor a token's state
 * size, so the operator gives one of:
 * - `cache-ram-tokens=N`: the bound in tokens (0: no host cache);
 * - `cache-ram=MIB` with `kv-bytes-per-token=B` (2 x n_layer x n_head_kv x head_dim x bytes per
 *   element): `MIB x 2^20 / B` tokens.
 * Tokens become whole blocks of the gateway's block size. Neither: undefined (slots alone).
 */
import type { BackendConfig } from './backendConfig.ts';

/** The host cache's bound in tokens, or undefined when the backend does not size it. */
export function backendHostCacheTokens(b: BackendConfig): number | undefined {
  if (b.cacheRamTokens !== undefined) return b.cacheRamTokens;
  if (b.cacheRamMiB === undefined || b.kvBytesPerToken === undefined) return undefined;
  return Math.floor((b.cacheRamMiB * 2 ** 20) / b.kvBytesPerToken);
}

/** The host cache's bound in blocks of `blockSize` tokens, or undefined (not sized). */
export function backendHostCacheBlocks(b: BackendConfig, blockSize: number): number | undefined {
  const tokens = backendHostCacheTokens(b);
  return tokens === undefined ? undefined : Math.floor(tokens / blockSize);
}
