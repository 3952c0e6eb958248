/**
 * The audit's hit counter from a vLLM `/metrics` page: the GPU prefix cache's hits plus a KV
 * connector's (a CPU tier's), which vLLM counts apart (vllm/v1/metrics/loggers.py:
 * `vllm:prefix_cache_hits` and `vllm:external_prefix_cache_hits`, `_total` added by
 * prometheus_client), summed over engines.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseEngineCacheFacts } from '../../src/serving/audit/engineFacts.ts';

const PAGE = `# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 320.0
vllm:prefix_cache_hits_total{engine="1",model_name="m"} 16.0
# HELP vllm:external_prefix_cache_hits_total External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.
# TYPE vllm:external_prefix_cache_hits_total counter
vllm:external_prefix_cache_hits_total{engine="0",model_name="m"} 64.0
vllm:external_prefix_cache_hits_created{engine="0",model_name="m"} 1.7e9
vllm:external_prefix_cache_queries_total{engine="0",model_name="m"} 999.0
vllm:cache_config_info{block_size="16",num_gpu_blocks="64"} 1.0
`;

test("hits are the GPU prefix cache's and the connector's, summed over engines", () => {
  assert.deepEqual(parseEngineCacheFacts(PAGE), { prefixCacheHitsTokens: 400, kvBlocks: 64 });
});

test('an engine without a connector: the GPU counter alone', () => {
  const page = PAGE.split('\n')
    .filter((l) => !l.includes('external'))
    .join('\n');
  assert.deepEqual(parseEngineCacheFacts(page), { prefixCacheHitsTokens: 336, kvBlocks: 64 });
});
