/**
 * The backends the gateway proxies to: one pooled keep-alive connection set per backend (undici
 * Pool), the headers each one gets, and the union of their model lists.
 */
import { Pool } from 'undici';
import type { BackendConfig } from './config.ts';

/** Connections per backend: enough for every in-flight stream of a busy replica. */
const POOL_CONNECTIONS = 256;
/** Below the engines' (node's default 5 s) idle timeout, so a pooled socket is never half-closed. */
const POOL_KEEP_ALIVE_MS = 4_000;
/** Long prefills behind deep queues can take minutes to their first byte; never forever. */
const HEADERS_TIMEOUT_MS = 300_000;
const BODY_TIMEOUT_MS = 300_000;

export interface Backend {
  /** Replica name in the router: host:port of the backend. */
  readonly name: string;
  readonly config: BackendConfig;
  readonly pool: Pool;
}

export function replicaName(url: string): string {
  return new URL(url).host;
}

export function makeBackends(configs: readonly BackendConfig[]): Backend[] {
  const seen = new Map<string, number>();
  return configs.map((config) => {
    // Two backends on one host:port would be one replica twice; keep names unique anyway.
    const base = replicaName(config.url);
    const n = (seen.get(base) ?? 0) + 1;
    seen.set(base, n);
    return {
      name: n === 1 ? base : `${base}#${n}`,
      config,
      pool: new Pool(config.url, {
        connections: POOL_CONNECTIONS,
        pipelining: 1,
        keepAliveTimeout: POOL_KEEP_ALIVE_MS,
        headersTimeout: HEADERS_TIMEOUT_MS,
        bodyTimeout: BODY_TIMEOUT_MS,
      }),
    };
  });
}

export interface ModelEntry {
  id: string;
  object: 'model';
  created?: number;
  owned_by?: string;
  [key: string]: unknown;
}

/** `/v1/models` of every backend merged by id; a backend that fails adds its configured model. */
export async function listModels(
  backends: readonly Backend[],
  timeoutMs = 1_000,
): Promise<ModelEntry[]> {
  const lists = await Promise.all(
    backends.map(async (b): Promise<ModelEntry[]> => {
      try {
        const headers: Record<string, string> = {};
        if (b.config.apiKey) headers.authorization = `Bearer ${b.config.apiKey}`;
        const { statusCode, body } = await b.pool.request({
          path: '/v1/models',
          method: 'GET',
          headers,
          headersTimeout: timeoutMs,
          bodyTimeout: timeoutMs,
        });
        const json = (await body.json()) as { data?: unknown };
        if (statusCode === 200 && Array.isArray(json.data)) {
          return json.data.filter(
            (m): m is ModelEntry => typeof (m as ModelEntry)?.id === 'string',
          );
        }
      } catch {
        // Fall through to the configured name.
      }
      return b.config.model ? [{ id: b.config.model, object: 'model', owned_by: 'kvroute' }] : [];
    }),
  );
  const byId = new Map<string, ModelEntry>();
  for (const list of lists) for (const m of list) if (!byId.has(m.id)) byId.set(m.id, m);
  return [...byId.values()];
}

export async function closeBackends(backends: readonly Backend[]): Promise<void> {
  await Promise.all(backends.map((b) => b.pool.destroy().catch(() => {})));
}
