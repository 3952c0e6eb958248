/**
 * `kvroute epp --nats URL`: the picker's model pools with the routing state shared over NATS,
 * as `kvroute serve --nats` shares it (`src/sync/`): every decision and release this picker
 * makes is published, its peers' (other pickers, gateways of the same cluster) are applied to
 * its routers' ledgers, a late joiner takes a snapshot, and a peer silent past the peer timeout
 * has its entries dropped. Several pickers behind one data plane then see one fleet-wide queue
 * per replica instead of the share each routed itself.
 */
import type { CentralEvents } from '../serving/centralEvents.ts';
import type { GatewayConfig } from '../serving/config.ts';
import { poolsOf } from '../serving/fromConfig.ts';
import type { Logger } from '../serving/log.ts';
import type { GatewayMetrics } from '../serving/metrics.ts';
import type { ModelPools } from '../serving/pools.ts';
import { StateSync } from '../sync/stateSync.ts';

export interface SyncedPools {
  pools: ModelPools;
  /** Null without `--nats` (this picker alone). */
  sync: StateSync | null;
}

export function syncedPools(
  config: GatewayConfig,
  logger: Logger,
  metrics: () => GatewayMetrics | null,
  central: CentralEvents | null = null,
): SyncedPools {
  if (config.nats === null) {
    return { pools: poolsOf(config, logger, metrics, undefined, central), sync: null };
  }
  let sync: StateSync | null = null;
  const pools = poolsOf(
    config,
    logger,
    metrics,
    {
      routed: (model, decision, request) => sync?.routed(model, decision, request),
      released: (model, requestId, stage) => sync?.released(model, requestId, stage),
    },
    central,
  );
  sync = new StateSync(
    config.nats,
    {
      routerOf: (model) => pools.poolFor(model)?.router,
      routers: () => pools.all().map((p) => ({ model: p.model, router: p.router })),
    },
    logger,
  );
  return { pools, sync };
}
