/**
 * Two figures of a vLLM `/metrics` page the audit needs and the load report does not: the
 * prefix cache's hit counter, `vllm:prefix_cache_hits_total` (prompt tokens served from the
 * cache since start, summed over engines), read when responses do not carry
 * `prompt_tokens_details`; and the KV pool's size, the `num_gpu_blocks` label of
 * `vllm:cache_config_info`, the approximate fallback's capacity. A KV connector's hits (a CPU
 * tier's: vLLM counts them in `vllm:external_prefix_cache_hits_total`, not in the GPU prefix
 * cache's counter) are added in, as the router predicts and `cached_tokens` reports both tiers.
 */

export const PREFIX_CACHE_HITS_METRIC = 'vllm:prefix_cache_hits_total';
export const EXTERNAL_PREFIX_CACHE_HITS_METRIC = 'vllm:external_prefix_cache_hits_total';
export const CACHE_CONFIG_METRIC = 'vllm:cache_config_info';

export interface EngineCacheFacts {
  prefixCacheHitsTokens?: number;
  kvBlocks?: number;
}

export function parseEngineCacheFacts(text: string): EngineCacheFacts {
  const facts: EngineCacheFacts = {};
  let hits: number | null = null;
  for (const line of text.split('\n')) {
    const metric = line.startsWith(PREFIX_CACHE_HITS_METRIC)
      ? PREFIX_CACHE_HITS_METRIC
      : line.startsWith(EXTERNAL_PREFIX_CACHE_HITS_METRIC)
        ? EXTERNAL_PREFIX_CACHE_HITS_METRIC
        : null;
    if (metric !== null) {
      const rest = line.slice(metric.length);
      if (rest[0] !== ' ' && rest[0] !== '{') continue;
      const afterLabels = rest[0] === '{' ? rest.slice(rest.indexOf('}') + 1) : rest;
      const value = Number(afterLabels.trim().split(/\s+/)[0]);
      if (Number.isFinite(value)) hits = (hits ?? 0) + value;
    } else if (line.startsWith(`${CACHE_CONFIG_METRIC}{`)) {
      const m = /num_gpu_blocks="(\d+)"/.exec(line);
      if (m) facts.kvBlocks = Number(m[1]);
    }
  }
  if (hits !== null) facts.prefixCacheHitsTokens = hits;
  return facts;
}
