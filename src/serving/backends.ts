/**
 * The backends the gateway proxies to: one pooled keep-alive connection set per backend (undici
 * Pool), the headers each one gets, and the two questions the gateway asks a backend outside the
 * request path: is it alive (`/health`) and what does it serve (`/v1/models`).
 */
import { Client, Pool } from 'undici';
import type { EngineDialect } from '../engines/dialect.ts';
import type { BackendConfig } from './backendConfig.ts';
import { trackSockets } from './reconnect.ts';

/** Connections per backend: enough for every in-flight stream of a busy replica. */
const POOL_CONNECTIONS = 256;
/** Below the engines' idle timeout (kvroute's 65 s, vLLM's uvicorn 5 s), so a pooled socket is never half-closed. */
const POOL_KEEP_ALIVE_MS = 4_000;
/** Long prefills behind deep queues can take minutes to their first byte; never forever. */
const HEADERS_TIMEOUT_MS = 300_000;
const BODY_TIMEOUT_MS = 300_000;
/** `/v1/models` and `/health` asked outside the request path answer within this, or not at all. */
export const ASK_TIMEOUT_MS = 1_000;

export interface Backend {
  /** Replica name in the router: host:port of the backend. */
  readonly name: string;
  readonly config: BackendConfig;
  readonly pool: Pool;
  /** Its engine's dialect once known (engineDetect.ts); absent: vLLM's. */
  dialect?: EngineDialect;
}

export function replicaName(url: string): string {
  return new URL(url).host;
}

export function makeBackend(config: BackendConfig, name = replicaName(config.url)): Backend {
  trackSockets();
  return {
    name,
    config,
    pool: new Pool(config.url, {
      connections: POOL_CONNECTIONS,
      pipelining: 1,
      keepAliveTimeout: POOL_KEEP_ALIVE_MS,
      headersTimeout: HEADERS_TIMEOUT_MS,
      bodyTimeout: BODY_TIMEOUT_MS,
    }),
  };
}

/** Replica names of a configured list: host:port, with `#2`, `#3` for a repeated one. */
export function backendNames(configs: readonly BackendConfig[]): string[] {
  const seen = new Map<string, number>();
  return configs.map((config) => {
    // Two backends on one host:port would be one replica twice; keep names unique anyway.
    const base = replicaName(config.url);
    const n = (seen.get(base) ?? 0) + 1;
    seen.set(base, n);
    return n === 1 ? base : `${base}#${n}`;
  });
}

/** One `/v1/models` entry, vLLM's `ModelCard`: adapters name their base model in `parent`. */
export interface ModelCard {
  id: string;
  object: 'model';
  created?: number;
  owned_by?: string;
  root?: string | null;
  parent?: string | null;
  max_model_len?: number | null;
  [key: string]: unknown;
}

export function backendHeaders(backend: Backend): Record<string, string> {
  return backend.config.apiKey ? { authorization: `Bearer ${backend.config.apiKey}` } : {};
}

/** The backend's `/v1/models` entries, or null when it could not be asked (down, not OpenAI). */
export async function readModelCards(
  backend: Backend,
  timeoutMs = ASK_TIMEOUT_MS,
): Promise<ModelCard[] | null> {
  try {
    const { statusCode, body } = await backend.pool.request({
      path: '/v1/models',
      method: 'GET',
      headers: backendHeaders(backend),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    const json = (await body.json()) as { data?: unknown };
    if (statusCode === 200 && Array.isArray(json.data)) {
      return json.data.filter((m): m is ModelCard => typeof (m as ModelCard)?.id === 'string');
    }
  } catch {
    // Unreachable, slow or not JSON: the caller falls back to the configured model.
  }
  return null;
}

/**
 * One `GET /health`: true on a 200 within the timeout. A server without `/health` (a 404: a
 * plain OpenAI-compatible one) is asked `/v1/models` instead.
 */
export async function probeHealth(backend: Backend, timeoutMs = ASK_TIMEOUT_MS): Promise<boolean> {
  const ask = async (path: string): Promise<number> => {
    const { statusCode, body } = await backend.pool.request({
      path,
      method: 'GET',
      headers: path === '/health' ? {} : backendHeaders(backend),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    await body.dump();
    return statusCode;
  };
  try {
    const path = backend.dialect?.healthPath ?? '/health';
    const status = await ask(path);
    if (status === 404 && path === '/health') return (await ask('/v1/models')) === 200;
    return status === 200;
  } catch {
    return false;
  }
}

/**
 * A one-off connection to the backend, for the retry of a request whose kept-alive socket the
 * backend closed under it: a new socket, whatever the pool holds. Close it after the attempt.
 */
export function freshConnection(backend: Backend): Client {
  return new Client(backend.config.url, {
    pipelining: 1,
    headersTimeout: HEADERS_TIMEOUT_MS,
    bodyTimeout: BODY_TIMEOUT_MS,
  });
}

export async function closeBackend(backend: Backend): Promise<void> {
  await backend.pool.destroy().catch(() => {});
}
