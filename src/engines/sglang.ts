/**
 * SGLang: load from `/metrics` (`sglang:num_running_reqs`, `sglang:num_queue_reqs`,
 * `sglang:token_usage`; python/sglang/srt/metrics/collector.py, SchedulerMetricsCollector),
 * tokens from `POST /tokenize` (`{prompt}` -> `{tokens, count, max_model_len}`, as vLLM's),
 * cache from its KV events (the router's events index; their decoding is not this file's).
 */
import { type EngineDialect, type LoadReport, max, readGauges, sum } from './dialect.ts';
import { vllmTokenize } from './vllm.ts';

export const SGLANG_RUNNING = 'sglang:num_running_reqs';
export const SGLANG_WAITING = 'sglang:num_queue_reqs';
export const SGLANG_TOKEN_USAGE = 'sglang:token_usage';
const NAMES = new Set([SGLANG_RUNNING, SGLANG_WAITING, SGLANG_TOKEN_USAGE]);

/** Counts summed over label sets (data-parallel ranks), usage the max; null when none is there. */
export function parseSglangLoad(text: string): LoadReport | null {
  const g = readGauges(text, NAMES);
  if (g.size === 0) return null;
  return {
    kvUsage: max(g.get(SGLANG_TOKEN_USAGE)) ?? 0,
    running: sum(g.get(SGLANG_RUNNING)) ?? 0,
    waiting: sum(g.get(SGLANG_WAITING)) ?? 0,
  };
}

export const sglang: EngineDialect = {
  kind: 'sglang',
  loadPath: '/metrics',
  parseLoad: parseSglangLoad,
  readLoad: async (get) => {
    const page = await get('/metrics');
    return page.status === 200 ? parseSglangLoad(page.text) : null;
  },
  cacheSource: 'events',
  tokenizes: true,
  tokenize: (body, post) => vllmTokenize('/tokenize', body, post),
  healthPath: '/health',
};
