/**
 * The embedded fleet `kvroute serve` starts when no backend is given: simulated engines in this
 * process, on free loopback ports, each publishing KV events and serving replay. In-process
 * rather than child processes: one process to start and stop (Ctrl-C ends everything, nothing is
 * orphaned), no ready-line handshakes, instant start. The price is one shared event loop, which
 * is fine for a demo; benchmarks and real deployments point --backend at separate servers.
 */
import { type EngineServerHandle, startEngineServer } from '../engine/server/server.ts';
import type { BackendConfig } from './config.ts';

export interface EmbeddedFleetOptions {
  replicas: number;
  /** Modeled time runs this many times faster than the wall clock. */
  speedup?: number;
  blockSize?: number;
  host?: string;
}

export interface EmbeddedFleet {
  backends: BackendConfig[];
  engines: EngineServerHandle[];
  close(): Promise<void>;
}

export async function startEmbeddedFleet(options: EmbeddedFleetOptions): Promise<EmbeddedFleet> {
  const host = options.host ?? '127.0.0.1';
  const engines: EngineServerHandle[] = [];
  try {
    for (let i = 0; i < options.replicas; i++) {
      engines.push(
        await startEngineServer({
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
    await Promise.allSettled(engines.map((e) => e.close()));
    throw err;
  }
  return {
    engines,
    backends: engines.map(backendOf),
    async close() {
      await Promise.allSettled(engines.map((e) => e.close()));
    },
  };
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
