/** A small `kvroute epp` for the tests: embedded engines, every port picked free on 127.0.0.1. */
import { defaultConfig } from '../../src/serving/config.ts';
import { type EppFleetHandle, startEppWithFleet } from '../../src/embedded/epp.ts';

export type { EppFleetHandle };

/**
 * Reports are taken as stale only after a minute: on a busy machine the embedded engines' reports
 * can lag the default 500 ms, and a stale replica is left out of routing, which these tests do not
 * exercise.
 */
const TEST_STALE_MS = 60_000;

export function startTestEpp(replicas: number, policy = defaultConfig().policy) {
  return startEppWithFleet(
    {
      ...defaultConfig(),
      embeddedReplicas: replicas,
      policy,
      exposeReplicaAddresses: true,
      staleMs: TEST_STALE_MS,
    },
    { port: 0, healthPort: 0, metricsPort: 0, embeddedSpeedup: 500 },
  );
}
