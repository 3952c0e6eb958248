/**
 * `kvroute serve` (and `npm start`): the gateway over the configured backends, or, when none is
 * configured, over an embedded fleet of `config.embeddedReplicas` simulated engines started
 * first and stopped after the gateway. The fleet is one model pool; a reloaded config without
 * backends keeps it.
 */
import type { GatewayConfig } from '../serving/config.ts';
import {
  type GatewayHandle,
  type GatewayOptions,
  type ReplicaInfo,
  startGateway,
} from '../gateway/gateway.ts';
import type { RealEngines } from '../engine/runtime/llamaCpp/serve.ts';
import { fleetFor } from './fleet.ts';

export interface ServeOptions extends GatewayOptions {
  /** Modeled speedup of the embedded fleet's engines (only when no backend is configured). */
  embeddedSpeedup?: number;
  /** Real embedded engines (the llama.cpp runtime) instead of simulated ones. */
  embeddedReal?: RealEngines;
}

export interface ServeHandle extends GatewayHandle {
  replicas: (ReplicaInfo & { embedded: boolean })[];
}

export async function startGatewayWithFleet(
  config: GatewayConfig,
  options: ServeOptions = {},
): Promise<ServeHandle> {
  // The engines tokenize as the gateway does (and share its loaded tokenizer). With NATS and no
  // backend, the gateway follows the engines registered there instead.
  const fleet =
    config.nats === null
      ? await fleetFor(config, options.embeddedSpeedup, options.embeddedReal)
      : null;
  let gateway: GatewayHandle;
  try {
    gateway = await startGateway(
      fleet ? { ...config, backends: fleet.backends } : config,
      options.logger ? { logger: options.logger } : {},
    );
  } catch (err) {
    await fleet?.close();
    throw err;
  }
  let closed: Promise<void> | null = null;
  const embedded = fleet;
  return {
    url: gateway.url,
    port: gateway.port,
    replicas: gateway.replicas.map((r) => ({ ...r, embedded: embedded !== null })),
    get router() {
      return gateway.router;
    },
    pools: gateway.pools,
    metrics: gateway.metrics,
    sync: gateway.sync,
    planner: gateway.planner,
    backends: () => gateway.backends(),
    // A reloaded config without backends still means the embedded fleet.
    reload: (next) =>
      gateway.reload(
        embedded && next.backends.length === 0 ? { ...next, backends: embedded.backends } : next,
      ),
    close() {
      closed ??= gateway.close().then(() => embedded?.close());
      return closed;
    },
  };
}
