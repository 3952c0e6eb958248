/** A small `kvroute epp` for the tests: embedded engines, every port picked free on 127.0.0.1. */
import { defaultConfig } from '../../src/serving/config.ts';
import { type EppFleetHandle, startEppWithFleet } from '../../src/embedded/epp.ts';

export type { EppFleetHandle };

export function startTestEpp(replicas: number, policy = defaultConfig().policy) {
  return startEppWithFleet(
    { ...defaultConfig(), embeddedReplicas: replicas, policy, exposeReplicaAddresses: true },
    { port: 0, healthPort: 0, metricsPort: 0, embeddedSpeedup: 500 },
  );
}
