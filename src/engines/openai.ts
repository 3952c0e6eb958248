/**
 * Any OpenAI-compatible server with no metrics, no events and no tokenizer endpoint: routed on
 * the router's own record. Its load is the router's ledger (what it routed there and has not
 * seen finish), its cache what the router sent there, its health `GET /v1/models`.
 */
import type { EngineDialect } from './dialect.ts';

export const openai: EngineDialect = {
  kind: 'openai',
  loadPath: null,
  parseLoad: () => null,
  readLoad: async () => null,
  cacheSource: 'ledger',
  tokenizes: false,
  tokenize: () => Promise.reject(new Error('an openai backend has no tokenizer endpoint')),
  healthPath: '/v1/models',
};
