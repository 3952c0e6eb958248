/**
 * SGLang: load from `/metrics` (`sglang:num_running_reqs`, `sglang:num_queue_reqs`,
 * `sglang:token_usage`; read by sglang/metrics.ts), tokens from its text-only `POST /tokenize`
 * (sglang/tokenize.ts), cache from its KV events (sglang/events.ts, fed to the events index).
 */
import { type EngineDialect, metricsLoad, readTokenizeAnswer } from './dialect.ts';
import { parseSglangMetrics } from './sglang/metrics.ts';
import { readSglangTokenizeResponse, sglangTokenizeRequest } from './sglang/tokenize.ts';

export const parseSglangLoad = parseSglangMetrics;

export const sglang: EngineDialect = {
  kind: 'sglang',
  loadPath: '/metrics',
  parseLoad: parseSglangLoad,
  readLoad: metricsLoad(parseSglangLoad),
  cacheSource: 'events',
  tokenizes: true,
  tokenize: async (body, post) => {
    const asked = sglangTokenizeRequest(body);
    // SGLang's /tokenize is text only: a chat prompt is tokenized by the next backend or locally.
    if (asked === null) throw new Error('(SGLang) /tokenize takes no chat messages');
    return readTokenizeAnswer(
      '/tokenize',
      await post('/tokenize', asked),
      readSglangTokenizeResponse,
    );
  },
  healthPath: '/health',
};
