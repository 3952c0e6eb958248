/**
 * Shared pieces of the gateway's end-to-end tests: simulated engines and gateways on 127.0.0.1
 * port 0, deterministic token-id prompts, and bounded polling. Everything started here is closed
 * by the caller's `after` hooks.
 */
import type { GatewayConfig } from '../../src/serving/config.ts';
import { defaultConfig } from '../../src/serving/config.ts';
import { backendOf } from '../../src/embedded/fleet.ts';
import { type GatewayHandle, startGateway } from '../../src/gateway/gateway.ts';
import { type EngineServerOptions, startEngineServer } from '../../src/engine/server/server.ts';
import type { EngineServerHandle } from '../../src/engine/server/server.ts';

export type { EngineServerHandle, GatewayHandle };

export async function startEngine(options: EngineServerOptions = {}): Promise<EngineServerHandle> {
  return startEngineServer({
    host: '127.0.0.1',
    port: 0,
    kvEvents: 'tcp://127.0.0.1:*',
    kvReplay: 'tcp://127.0.0.1:*',
    ...options,
  });
}

export async function startEngines(
  n: number,
  options: EngineServerOptions = {},
): Promise<EngineServerHandle[]> {
  const engines: EngineServerHandle[] = [];
  for (let i = 0; i < n; i++) engines.push(await startEngine({ seed: i, ...options }));
  return engines;
}

/** Restarts a closed engine on the same HTTP and ZMQ ports (a process restart, cold). */
export async function restartEngine(
  old: EngineServerHandle,
  options: EngineServerOptions = {},
): Promise<EngineServerHandle> {
  const zmqPort = (endpoint: string | null) =>
    endpoint ? `tcp://*:${endpoint.split(':').pop()}` : null;
  return startEngineServer({
    host: '127.0.0.1',
    port: old.port,
    kvEvents: zmqPort(old.eventsEndpoint),
    kvReplay: zmqPort(old.replayEndpoint),
    ...options,
  });
}

export function configFor(
  engines: readonly EngineServerHandle[],
  overrides: Partial<GatewayConfig> = {},
): GatewayConfig {
  return {
    ...defaultConfig(),
    port: 0,
    backends: engines.map(backendOf),
    // The tests read a replica header as the router's name of the replica (its host:port).
    exposeReplicaAddresses: true,
    ...overrides,
  };
}

export async function startGatewayFor(
  engines: readonly EngineServerHandle[],
  overrides: Partial<GatewayConfig> = {},
): Promise<GatewayHandle> {
  return startGateway(configFor(engines, overrides));
}

/** Deterministic token ids (all within the builtin vocabulary), distinct per seed. */
export function tokens(seed: number, count: number): number[] {
  const out = new Array<number>(count);
  let x = (seed * 2654435761 + 12345) >>> 0;
  for (let i = 0; i < count; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    out[i] = 1000 + (x % 90_000);
  }
  return out;
}

export async function waitFor<T>(
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  what: string,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export interface ReplicaJson {
  name: string;
  url: string;
  healthy: boolean;
  indexedBlocks: number;
  queuedPromptTokens: number;
  inFlight: number;
  /** The engine's last report: its waiting requests, and when the router took it (epoch ms). */
  waiting: number | null;
  reportedAtMs: number | null;
  subscriber: {
    lastSeq: string | null;
    batches: number;
    restarts: number;
    gapsFilled: number;
    gapsUnfilled: number;
    replayCutoffs: number;
  } | null;
}

export async function replicas(gw: GatewayHandle): Promise<ReplicaJson[]> {
  const res = await fetch(`${gw.url}/router/replicas`);
  return ((await res.json()) as { replicas: ReplicaJson[] }).replicas;
}

export async function replicaOf(
  gw: GatewayHandle,
  engine: EngineServerHandle,
): Promise<ReplicaJson> {
  const all = await replicas(gw);
  const r = all.find((x) => x.url === engine.url);
  if (!r) throw new Error(`no replica for ${engine.url}`);
  return r;
}

export interface CompletionJson {
  choices?: { text?: string }[];
  usage?: { prompt_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } | null };
  error?: { message: string; type: string; code: unknown; param?: unknown };
}

/** POSTs a completion through `base`; returns status, serving replica and parsed body. */
export async function complete(
  base: string,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<{ status: number; replica: string | null; json: CompletionJson | null; text: string }> {
  const res = await fetch(`${base}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let json: CompletionJson | null = null;
  try {
    json = JSON.parse(text);
  } catch {}
  return { status: res.status, replica: res.headers.get('x-kvroute-replica'), json, text };
}

/** Resolves with the value, or rejects when `ms` pass first: a hang is a failure. */
export function within<T>(ms: number, p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} hung for ${ms} ms`)), ms);
    }),
  ]);
}
