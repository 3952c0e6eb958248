/**
 * What a gateway or an endpoint picker builds from its config: the pools' tokenizers, the model
 * pools, the bound KV event socket, the metrics and flow control.
 */
import { verdictsOf } from './audit/observe.ts';
import { CentralEvents } from './centralEvents.ts';
import { loadPromptTokenizer, type PromptTokenizer } from '../tokenizer/promptTokenizer.ts';
import type { GatewayConfig } from './config.ts';
import { FlowControl } from './flowControl.ts';
import type { Logger } from './log.ts';
import { GatewayMetrics } from './metrics.ts';
import type { RouteObserver } from './pool.ts';
import { GatewayPlanner } from './planner.ts';
import { ModelPools } from './pools.ts';

/**
 * Each pool's tokenizer: its model's own when the config names one, else the gateway's. All are
 * loaded at start, so a bad path fails there rather than when a backend of that model appears.
 */
export function tokenizersOf(config: GatewayConfig): (model: string | null) => PromptTokenizer {
  const shared = loadPromptTokenizer({
    tokenizer: config.tokenizer,
    chatTemplate: config.chatTemplate,
  });
  const own = new Map(
    Object.entries(config.modelTokenizers).map(([model, t]) => [
      model,
      loadPromptTokenizer({
        tokenizer: t.tokenizer ?? config.tokenizer,
        chatTemplate: t.chatTemplate ?? config.chatTemplate,
      }),
    ]),
  );
  return (model) => (model === null ? undefined : own.get(model)) ?? shared;
}

/**
 * The config's model pools with their tokenizers. A `--tokenize remote` fallback is logged and
 * counted in `metrics()` once that exists (the metrics are built over the pools).
 */
export function poolsOf(
  config: GatewayConfig,
  logger: Logger,
  metrics: () => GatewayMetrics | null,
  observer?: RouteObserver,
  central?: CentralEvents | null,
): ModelPools {
  return new ModelPools({
    config,
    logger,
    tokenizerFor: tokenizersOf(config),
    tokenize: config.tokenize,
    onRemoteFallback: (err) => {
      metrics()?.remoteTokenizeFallbacks.inc();
      logger.warn({ err }, '--tokenize remote: no backend tokenized a request, tokenized locally');
    },
    ...(observer && { observer }),
    central: central ?? null,
  });
}

/** The bound KV event socket of `kv-events-bind` (events mode only), or null. */
export async function centralEventsOf(
  config: GatewayConfig,
  logger: Logger,
): Promise<CentralEvents | null> {
  if (config.kvEventsBind === null || config.index !== 'events') return null;
  const central = await CentralEvents.bind(config.kvEventsBind, logger);
  logger.info(
    { endpoint: central.endpoint },
    'KV events: bound for engines to connect to (topics kv@<pod-ip>@<model>)',
  );
  return central;
}

/** The gateway's metrics over `pools`, labelled with the config's tenants. */
export function metricsOf(config: GatewayConfig, pools: ModelPools): GatewayMetrics {
  const metrics = new GatewayMetrics({
    replicaLoads: () => pools.replicaLoads(),
    knownTenants: configuredTenants(config),
  });
  metrics.audit.follow(verdictsOf(pools));
  return metrics;
}

/** `--flow-control`: the front end's flow control over its pools, or null when off. */
export function flowControlOf(config: GatewayConfig, metrics: GatewayMetrics): FlowControl | null {
  return config.flowControl.enabled
    ? new FlowControl(config.flowControl, config.admission, metrics)
    : null;
}

/** Every tenant the config names: the metrics' `tenant` label takes only these. */
/** The online planner (`--planner`), not started; null when off. */
export function plannerOf(
  config: GatewayConfig,
  metrics: GatewayMetrics,
  logger: Logger,
): GatewayPlanner | null {
  return config.planner === null
    ? null
    : new GatewayPlanner(config.planner, {
        registry: metrics.registry,
        logger,
        policy: config.policy,
        blockSize: config.blockSize,
      });
}

export function configuredTenants(config: GatewayConfig): string[] {
  return [
    ...new Set([
      ...config.apiKeys.map((k) => k.tenant),
      ...Object.keys(config.tenantSalts),
      ...Object.keys(config.admission.tenantLimits),
      ...Object.keys(config.admission.tenantPriority),
      ...Object.keys(config.flowControl.tenantWeights),
    ]),
  ];
}
