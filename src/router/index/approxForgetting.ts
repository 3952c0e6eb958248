/**
 * How an approximate prefix record forgets: the router's record of what it sent where never hears
 * of the engine's evictions, so each project bounds it its own way, and a block the engine
 * evicted long ago can still be predicted as a hit (the "stale guess").
 *
 * - `kvroute`: this project's own (src/router/index/approxIndex.ts): least recently routed first, past
 *   a capacity in blocks, at every route.
 * - `llmd`: llm-d's approximate prefix-cache scorer as of September 2025 (Gateway API inference
 *   extension v1.0.1, 2b313acf, pkg/epp/scheduling/framework/plugins/multi/prefix/plugin.go and
 *   indexer.go; the same at f4ab8c68, 2025-09-20, but for the rename of `hashBlockSize` to
 *   `blockSize`, first released in v1.1.0). `hashPrompt` cuts the prompt's bytes into blocks of
 *   `hashBlockSize` characters (`DefaultHashBlockSize = 64`, "vLLM default token block size is
 *   16, and a good guess of average characters per token is 4"), drops a last partial block, and
 *   hashes only the first `maxPrefixBlocksToMatch` (256) blocks: input past them is truncated
 *   and never scored. `PreRequest` adds the request's hashes to the chosen pod's LRU of
 *   `lruCapacityPerServer` entries (31,250) in prompt order (`indexer.Add` loops `for _, hash :=
 *   range hashes`), so a route's first block is its least recent one and goes first when the LRU
 *   is full. Modelled at 4 characters a token (the source's own guess): blocks of
 *   `hashBlockSize / 4` tokens expressed in the engine's blocks (`llmdPrefixForgetting`).
 * - `sglang`: the SGLang router's cache_aware policy (sgl-router/src/policies/cache_aware.rs,
 *   sgl-router/src/tree.rs): a radix tree of request text per worker, trimmed least recently used first
 *   to `max_tree_size = 2^24` characters per tenant by a thread woken every
 *   `eviction_interval_secs = 60`; between wake-ups it grows without bound. Characters are
 *   counted here at 4 per token (llm-d's `averageCharactersPerToken`), so 4,194,304 tokens.
 * - `dynamo`: Dynamo's approximate KV indexer (lib/llm/src/kv_router/approx.rs, `PruneConfig`
 *   default; `router_ttl_secs: 120.0`, `router_max_tree_size: 2^20`,
 *   `router_prune_target_ratio: 0.8`): every block expires 120 s after it was last routed, and a
 *   tree past 2^20 blocks is pruned, oldest first, to 80 % of that.
 */

/**
 * llm-d's prefix-cache-scorer parameters (plugin.go's `Config`), as its EndpointPickerConfig
 * names them: `hashBlockSize` in characters, `maxPrefixBlocksToMatch` and `lruCapacityPerServer`
 * in those blocks.
 */
export interface LlmdPrefixConfig {
  hashBlockSize: number;
  maxPrefixBlocksToMatch: number;
  lruCapacityPerServer: number;
}

/** plugin.go's defaults: DefaultHashBlockSize, DefaultMaxPrefixBlocks, DefaultLRUCapacityPerServer. */
export const DEFAULT_LLMD_PREFIX_CONFIG: Readonly<LlmdPrefixConfig> = {
  hashBlockSize: 64,
  maxPrefixBlocksToMatch: 256,
  lruCapacityPerServer: 31_250,
};
/** plugin.go: "a good guess of average characters per token is 4". */
const LLMD_CHARS_PER_TOKEN = 4;
/** SGLang router: max_tree_size in characters, at llm-d's 4 characters per token. */
const SGLANG_MAX_TREE_CHARS = 2 ** 24;
const CHARS_PER_TOKEN = 4;
const SGLANG_EVICTION_INTERVAL_MS = 60_000;
const DYNAMO_TTL_MS = 120_000;
const DYNAMO_MAX_TREE_BLOCKS = 2 ** 20;
const DYNAMO_PRUNE_TARGET_RATIO = 0.8;

export const APPROX_FORGET_MODES = ['kvroute', 'peer', 'llmd', 'sglang', 'dynamo'] as const;
export type ApproxForgetMode = (typeof APPROX_FORGET_MODES)[number];

export interface ApproxForgetting {
  /** Blocks remembered per replica; past it the least recently routed go first. */
  capacityBlocks: number;
  /** The capacity is enforced only every this many ms (a background sweep); 0: at each route. */
  sweepMs: number;
  /** A block not routed for this many ms is forgotten; 0: never. */
  ttlMs: number;
  /** Past the capacity, trimmed down to this share of it (1: to the capacity). */
  trimToRatio: number;
  /** Only a route's first this many blocks are recorded (and so can match); 0 or absent: all. */
  maxPrefixBlocks?: number;
  /** A route's blocks are recorded first block first (its root least recent); absent: last first. */
  recordInPromptOrder?: boolean;
}

/** kvroute's own: LRU at `capacityBlocks`, at every route. */
export function lruForgetting(capacityBlocks: number): ApproxForgetting {
  return { capacityBlocks, sweepMs: 0, ttlMs: 0, trimToRatio: 1 };
}

/**
 * The forgetting of the peer named `mode`, in blocks of `blockSize` tokens; `kvroute` keeps
 * `kvrouteCapacityBlocks`. `peer` is resolved by the caller (each policy its own project's).
 */
export function approxForgetting(
  mode: Exclude<ApproxForgetMode, 'peer'>,
  blockSize: number,
  kvrouteCapacityBlocks: number,
  llmd: Readonly<LlmdPrefixConfig> = DEFAULT_LLMD_PREFIX_CONFIG,
): ApproxForgetting {
  switch (mode) {
    case 'kvroute':
      return lruForgetting(kvrouteCapacityBlocks);
    case 'llmd':
      return llmdPrefixForgetting(llmd, blockSize);
    case 'sglang':
      return {
        capacityBlocks: Math.max(
          1,
          Math.floor(SGLANG_MAX_TREE_CHARS / CHARS_PER_TOKEN / blockSize),
        ),
        sweepMs: SGLANG_EVICTION_INTERVAL_MS,
        ttlMs: 0,
        trimToRatio: 1,
      };
    case 'dynamo':
      return {
        capacityBlocks: DYNAMO_MAX_TREE_BLOCKS,
        sweepMs: 0,
        ttlMs: DYNAMO_TTL_MS,
        trimToRatio: DYNAMO_PRUNE_TARGET_RATIO,
      };
  }
}

/**
 * llm-d's prefix scorer in the engine's blocks of `blockSize` tokens: its blocks are
 * `hashBlockSize / 4` tokens, so its LRU holds `lruCapacityPerServer` of them
 * (500,000 tokens by default) and it hashes the first `maxPrefixBlocksToMatch` of them
 * (4,096 tokens by default), each rounded to whole engine blocks (at least 1).
 */
export function llmdPrefixForgetting(
  config: Readonly<LlmdPrefixConfig>,
  blockSize: number,
): ApproxForgetting {
  const blockTokens = config.hashBlockSize / LLMD_CHARS_PER_TOKEN;
  return {
    ...lruForgetting(
      Math.max(1, Math.round((config.lruCapacityPerServer * blockTokens) / blockSize)),
    ),
    maxPrefixBlocks: Math.max(
      1,
      Math.floor((config.maxPrefixBlocksToMatch * blockTokens) / blockSize),
    ),
    recordInPromptOrder: true,
  };
}

/** `peer`: the project a policy stands for forgets as that project does; others as kvroute. */
export function peerForgetMode(policy: string): Exclude<ApproxForgetMode, 'peer'> {
  return policy === 'llmd' || policy === 'sglang' || policy === 'dynamo' ? policy : 'kvroute';
}
