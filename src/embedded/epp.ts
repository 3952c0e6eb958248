/**
 * `kvroute epp` with no backend: the endpoint picker over an embedded fleet of simulated
 * engines started first (their `127.0.0.1:port` are the endpoints it names) and stopped after
 * it. For a demonstration, the tests and `npm run bench:epp`; a real picker names its pool's pods.
 */
import type { GatewayConfig } from '../serving/config.ts';
import { type EppHandle, type EppOptions, startEpp } from '../epp/server.ts';
import { type EmbeddedFleet, fleetFor } from './fleet.ts';

export interface EppFleetOptions extends EppOptions {
  /** Modeled speedup of the embedded fleet's engines (only when no backend is configured). */
  embeddedSpeedup?: number;
}

export interface EppFleetHandle extends EppHandle {
  /** The embedded fleet, null when the config named backends. */
  fleet: EmbeddedFleet | null;
}

export async function startEppWithFleet(
  config: GatewayConfig,
  options: EppFleetOptions = {},
): Promise<EppFleetHandle> {
  const fleet = await fleetFor(config, options.embeddedSpeedup);
  let epp: EppHandle;
  try {
    epp = await startEpp(fleet ? { ...config, backends: fleet.backends } : config, options);
  } catch (err) {
    await fleet?.close();
    throw err;
  }
  let closed: Promise<void> | null = null;
  return {
    ...epp,
    fleet,
    close() {
      closed ??= epp.close().then(() => fleet?.close());
      return closed;
    },
  };
}
