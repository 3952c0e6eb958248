/**
 * An embedded fleet: simulated engine servers in this process, on free loopback ports, each
 * publishing KV events and serving replay, with the backend entries that point a gateway at
 * them. In-process rather than child processes: one process to start and stop (Ctrl-C ends
 * everything, nothing is orphaned), no ready-line handshakes, instant start. The price is one
 * shared event loop, which is fine for a demo or a test; benchmarks and real deployments run
 * engines as processes of their own.
 */
import {
  type EngineServerHandle,
  type EngineServerOptions,
  startEngineServer,
} from '../engine/server/index.ts';
import type { RealEngines } from '../engine/runtime/llamaCpp/serve.ts';
import type { GatewayConfig } from '../serving/config.ts';
import type { BackendConfig } from '../serving/backendConfig.ts';

export interface EmbeddedFleetOptions {
  replicas: number;
  /** Modeled time runs this many times faster than the wall clock. */
  speedup?: number;
  blockSize?: number;
  host?: string;
  /** Anything else every engine gets (model, scheduler, KV sizes...); engine i is seeded i. */
  engine?: Omit<EngineServerOptions, 'host' | 'port' | 'seed' | 'kvEvents' | 'kvReplay'>;
}

export interface EmbeddedFleet {
  backends: BackendConfig[];
  engines: EngineServerHandle[];
  close(): Promise<void>;
}

export async function startEmbeddedFleet(options: EmbeddedFleetOptions): Promise<EmbeddedFleet> {
  const host = options.host ?? '127.0.0.1';
  const engines: EngineServerHandle[] = [];
  const close = async () => {
    await Promise.allSettled(engines.map((e) => e.close()));
  };
  try {
    for (let i = 0; i < options.replicas; i++) {
      engines.push(
        await startEngineServer({
          ...options.engine,
          host,
          port: 0,
          seed: i,
          ...(options.speedup !== undefined && { speedup: options.speedup }),
          ...(options.blockSize !== undefined && { blockSize: options.blockSize }),
          kvEvents: `tcp://${host}:*`,
          kvReplay: `tcp://${host}:*`,
        }),
      );
    }
  } catch (err) {
    await close();
    throw err;
  }
  return { engines, backends: engines.map(backendOf), close };
}

/** The backend entry that points the gateway at an engine server (events, replay and model). */
export function backendOf(engine: EngineServerHandle): BackendConfig {
  return {
    url: engine.url,
    events: engine.eventsEndpoint,
    replay: engine.replayEndpoint,
    model: engine.servedModelName,
    apiKey: null,
  };
}

/**
 * The fleet a server command starts when its config names no backend (null when it names some):
 * `config.embeddedReplicas` engines that tokenize as the config says (and share its tokenizer).
 */
export async function fleetFor(
  config: Pick<
    GatewayConfig,
    'backends' | 'embeddedReplicas' | 'blockSize' | 'tokenizer' | 'chatTemplate'
  >,
  speedup?: number,
  real?: RealEngines,
): Promise<EmbeddedFleet | null> {
  if (config.backends.length > 0) return null;
  return startEmbeddedFleet({
    replicas: config.embeddedReplicas,
    blockSize: config.blockSize,
    host: '127.0.0.1',
    // Real engines tokenize with their model file's tokenizer.
    engine: real
      ? { runtime: 'llama.cpp', llamaCpp: { gguf: real.gguf, threads: real.threads } }
      : { tokenizer: config.tokenizer, chatTemplate: config.chatTemplate },
    ...(speedup !== undefined && !real && { speedup }),
  });
}
