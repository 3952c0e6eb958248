/**
 * SGLang: load from `/metrics` (`sglang:num_running_reqs`, `sglang:num_queue_reqs`,
 * `sglang:token_usage`; read by sglang/metrics.ts), tokens from its text-only `POST /tokenize`
 * (sglang/tokenize.ts), cache from its KV events (sglang/events.ts, fed to the events index).
 */
import { type EngineDialect, refusal } from './dialect.ts';
import { parseSglangMetrics } from './sglang/metrics.ts';
import { readSglangTokenizeResponse, sglangTokenizeRequest } from './sglang/tokenize.ts';

export const parseSglangLoad = parseSglangMetrics;

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
  tokenize: async (body, post) => {
    const asked = sglangTokenizeRequest(body);
    // SGLang's /tokenize is text only: a chat prompt is tokenized by the next backend or locally.
    if (asked === null) throw new Error('(SGLang) /tokenize takes no chat messages');
    const { status, json } = await post('/tokenize', asked);
    if (status === 400) throw refusal(json, 'the backend refused the prompt');
    const answer = status === 200 ? readSglangTokenizeResponse(json) : null;
    if (answer === null) {
      throw new Error(`/tokenize answered ${status}${status === 200 ? ' without token ids' : ''}`);
    }
    return answer;
  },
  healthPath: '/health',
};
