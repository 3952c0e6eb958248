/**
 * A model pool's router options from the gateway's config (`kvroute serve` and `kvroute epp`):
 * its policy, index, guards and seed, session affinity, delay-cost's decode term and llm-d's
 * scorer settings (configScorers.ts). Pure: the pool builds its router from this.
 */
import type { PolicyOptions, RouterOptions } from '../router/index.ts';
import type { GatewayConfig } from './config.ts';
import { scorerRouterOptions } from './configScorers.ts';

/** The config fields a pool's router is built from. */
export type PoolRouterConfig = Pick<
  GatewayConfig,
  'policy' | 'index' | 'kvThreshold' | 'staleMs' | 'seed' | 'blockSize'
> &
  Partial<
    Pick<GatewayConfig, 'decodeCost' | 'sessionAffinity' | 'scorerWeights' | 'prefixCacheScorer'>
  >;

/**
 * The router's options, with no replica yet (backends join as they come up). With llm-d's record
 * (`approxForgetting`), the record knows neither an engine's pool nor its CPU tier: the pool then
 * gives the router no backend's tiers.
 */
export function poolRouterOptions(config: PoolRouterConfig): RouterOptions {
  const scorers = scorerRouterOptions(config, config.index, config.blockSize);
  const policyOptions = { ...decodeCostOptions(config.decodeCost), ...scorers.policyOptions };
  return {
    replicas: [],
    policy: config.policy,
    indexMode: config.index,
    ...(Object.keys(policyOptions).length > 0 && { policyOptions }),
    ...(scorers.approxForgetting && { approxForgetting: scorers.approxForgetting }),
    kvThreshold: config.kvThreshold,
    staleMs: config.staleMs,
    seed: config.seed,
    ...(config.sessionAffinity && {
      sessions: {
        slackTokens: config.sessionAffinity.slackTokens,
        capacity: config.sessionAffinity.capacity,
      },
    }),
  };
}

/** delay-cost's decode term as policy options (none when not configured). */
function decodeCostOptions(decodeCost: GatewayConfig['decodeCost']): PolicyOptions {
  if (decodeCost === undefined) return {};
  return {
    decodeCostTokens: decodeCost.tokens,
    ...(decodeCost.budgetTokens !== undefined && { budgetTokens: decodeCost.budgetTokens }),
  };
}
