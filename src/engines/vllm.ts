/**
 * vLLM: load from `/metrics` (`vllm:num_requests_running`, `vllm:num_requests_waiting`,
 * `vllm:kv_cache_usage_perc`, `vllm:gpu_cache_usage_perc` before v0.10; vllm/v1/metrics/
 * loggers.py), tokens from `POST /tokenize` (`{prompt}` or `{messages}` -> `{tokens,
 * max_model_len}`, vllm/entrypoints/openai/serving_tokenization.py), cache from its KV events.
 */
import type { EngineDialect, LoadReport, Post, TokenizeAnswer, TokenizeBody } from './dialect.ts';
import { max, metricsLoad, readGauges, readTokenizeAnswer, sum, tokenIds } from './dialect.ts';

export const VLLM_KV_USAGE = 'vllm:kv_cache_usage_perc';
export const VLLM_KV_USAGE_OLD = 'vllm:gpu_cache_usage_perc';
export const VLLM_RUNNING = 'vllm:num_requests_running';
export const VLLM_WAITING = 'vllm:num_requests_waiting';
const NAMES = new Set([VLLM_KV_USAGE, VLLM_KV_USAGE_OLD, VLLM_RUNNING, VLLM_WAITING]);

/** Usage is the max over label sets, counts the sum; null when none of the gauges is there. */
export function parseVllmLoad(text: string): LoadReport | null {
  const g = readGauges(text, NAMES);
  if (g.size === 0) return null;
  const usage = max([...(g.get(VLLM_KV_USAGE) ?? []), ...(g.get(VLLM_KV_USAGE_OLD) ?? [])]);
  return {
    kvUsage: usage === null || !Number.isFinite(usage) ? 0 : usage,
    running: sum(g.get(VLLM_RUNNING)) ?? 0,
    waiting: sum(g.get(VLLM_WAITING)) ?? 0,
  };
}

/** `POST /tokenize` as vLLM serves it: the body as the gateway built it. */
export async function vllmTokenize(
  path: string,
  body: TokenizeBody,
  post: Post,
): Promise<TokenizeAnswer> {
  return readTokenizeAnswer(path, await post(path, body), (json) => {
    const ids = tokenIds(json);
    if (ids === null) return null;
    const len = (json as { max_model_len?: unknown }).max_model_len;
    return { ids, maxModelLen: Number.isInteger(len) ? (len as number) : null };
  });
}

export const vllm: EngineDialect = {
  kind: 'vllm',
  loadPath: '/metrics',
  parseLoad: parseVllmLoad,
  readLoad: metricsLoad(parseVllmLoad),
  cacheSource: 'events',
  tokenizes: true,
  tokenize: (body, post) => vllmTokenize('/tokenize', body, post),
  healthPath: '/health',
};
