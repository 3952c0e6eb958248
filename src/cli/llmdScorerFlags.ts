/**
 * llm-d's scorer options, one row each, shared by `kvroute sim`, `serve` and `epp` (serve's table
 * adds their config keys): `--scorer-weights prefix=W,kv=W,queue=W` and `--prefix-cache-scorer
 * hashBlockSize=C,maxPrefixBlocksToMatch=N,lruCapacityPerServer=N`, read by the one parser the
 * config file uses too (src/serving/configScorers.ts). In sim the estimated scorer's record is
 * `--approx-forget llmd|peer`'s; in serve and epp it is `--index approx`'s.
 */
import {
  DEFAULT_LLMD_PREFIX_CONFIG,
  type LlmdPrefixConfig,
} from '../router/index/approxForgetting.ts';
import type { PolicyOptions } from '../router/registry.ts';
import {
  formatPrefixConfig,
  formatScorerWeights,
  LLMD_FAMILY,
  PREFIX_CACHE_SCORER_KEYS,
  parsePrefixCacheScorer,
  parseScorerWeights,
  type ScorerSettings,
  type ScorerWeights,
  type SettingSource,
  scorerWeightOptions,
  weighsAnyOf,
} from '../serving/configScorers.ts';
import { UsageError } from './args.ts';
import { options, str } from './options/table.ts';

export { LLMD_FAMILY } from '../serving/configScorers.ts';

const WEIGHTS_HELP =
  `the llmd family's (${LLMD_FAMILY.join(', ')}) scorer weights as llm-d's ` +
  'EndpointPickerConfig sets them, keys prefix, kv, queue (each >= 0; a key left out keeps ' +
  "the policy's default: llmd 3/2/2, llmd-precise 2/1/1), e.g. prefix=1,kv=1,queue=1";
const PREFIX_HELP =
  "llm-d's estimated prefix-cache-scorer parameters, the approximate record's (sim: with " +
  "--approx-forget llmd or peer; serve and epp: with --index approx, their record then llm-d's, " +
  `no backend's kv-blocks or CPU tier), keys ${PREFIX_CACHE_SCORER_KEYS.join(', ')} (integers >= 1; ` +
  `default ${formatPrefixConfig(DEFAULT_LLMD_PREFIX_CONFIG)}): blocks of hashBlockSize ` +
  'characters (4 a token), only the first maxPrefixBlocksToMatch hashed, an LRU of ' +
  'lruCapacityPerServer blocks per pod';

// biome-ignore format: one option a line
export const LLMD_SCORER_OPTIONS = options({
  'scorer-weights': str('K=W,...', WEIGHTS_HELP),
  'prefix-cache-scorer': str('K=V,...', PREFIX_HELP),
});

/** A flag's errors: usage errors naming it. */
const flag = (name: string): SettingSource => ({
  name: `--${name}`,
  fail: (message) => new UsageError(message),
});

/** `--scorer-weights` as the weights given. */
export function readScorerWeightsFlag(raw: string): ScorerWeights {
  return parseScorerWeights(raw, flag('scorer-weights'));
}

/** `--scorer-weights`: the llmd family's weights as policy options. */
export function scorerWeightsFlagOptions(raw: string): PolicyOptions {
  return scorerWeightOptions(readScorerWeightsFlag(raw));
}

/** `--prefix-cache-scorer`: plugin.go's parameters over `base` (default: its defaults). */
export function readPrefixCacheScorerFlag(
  raw: string,
  base?: Readonly<LlmdPrefixConfig>,
): LlmdPrefixConfig {
  return parsePrefixCacheScorer(raw, flag('prefix-cache-scorer'), base);
}

/** `--scorer-weights` weighs the llmd family only: the policies must name one of it. */
export function checkScorerWeightsPolicies(policies: readonly string[]): void {
  if (weighsAnyOf(policies)) return;
  throw new UsageError(
    `--scorer-weights weighs the scorers of ${LLMD_FAMILY.join(', ')}; --policy names none of them ` +
      `(${policies.join(', ')})`,
  );
}

/** sim: `--prefix-cache-scorer` shapes llm-d's approximate record only. */
export function checkPrefixCacheScorerMode(approxForget: string | undefined): void {
  if (approxForget === 'llmd' || approxForget === 'peer') return;
  throw new UsageError(
    "--prefix-cache-scorer sets llm-d's approximate record: give it with --approx-forget llmd " +
      `or peer (and --index approx), got --approx-forget ${approxForget ?? 'kvroute (default)'}`,
  );
}

/** serve and epp: `--prefix-cache-scorer` shapes the approximate index's record. */
export function checkPrefixCacheScorerIndex(index: string): void {
  if (index === 'approx') return;
  throw new UsageError(
    "--prefix-cache-scorer sets llm-d's approximate record: give it with --index approx " +
      `(or index: approx in the config), got ${index}`,
  );
}

/**
 * serve and epp: `--scorer-weights` (its keys over the config file's) and `--prefix-cache-scorer`
 * (over the config file's parameters), checked against the policy and index they run with.
 */
export function readServeScorerFlags(
  given: { weights: string | undefined; prefixCache: string | undefined },
  config: Readonly<ScorerSettings & { policy: string; index: string }>,
): ScorerSettings {
  const scorerWeights =
    given.weights === undefined
      ? config.scorerWeights
      : { ...config.scorerWeights, ...readScorerWeightsFlag(given.weights) };
  const prefixCacheScorer =
    given.prefixCache === undefined
      ? config.prefixCacheScorer
      : readPrefixCacheScorerFlag(given.prefixCache, config.prefixCacheScorer);
  if (scorerWeights !== undefined) checkScorerWeightsPolicies([config.policy]);
  if (prefixCacheScorer !== undefined) checkPrefixCacheScorerIndex(config.index);
  return {
    ...(scorerWeights !== undefined && { scorerWeights }),
    ...(prefixCacheScorer !== undefined && { prefixCacheScorer }),
  };
}

/** The policy as serve's and epp's start lines name it: with its llm-d settings, where given. */
export function policyLabel(config: Readonly<ScorerSettings & { policy: string }>): string {
  const weights = config.scorerWeights;
  const prefix = config.prefixCacheScorer;
  return [
    config.policy,
    ...(weights ? [`scorer weights ${formatScorerWeights(weights)}`] : []),
    ...(prefix ? [`prefix-cache-scorer ${formatPrefixConfig(prefix)}`] : []),
  ].join(', ');
}
