/**
 * `kvroute sim`'s llm-d scorer options, written as an EndpointPickerConfig writes them:
 * - `--scorer-weights prefix=W,kv=W,queue=W`: the scheduling profile's weights of the prefix,
 *   kv-cache and queue scorers, for the llmd family (`llmd`, `llmd-precise`); a key left out keeps
 *   that policy's default (llmd.ts, llmdPrecise.ts).
 * - `--prefix-cache-scorer hashBlockSize=C,maxPrefixBlocksToMatch=N,lruCapacityPerServer=N`: the
 *   estimated prefix-cache-scorer's parameters (Gateway API inference extension v1.0.1,
 *   pkg/epp/scheduling/framework/plugins/multi/prefix/plugin.go, `Config`), for llm-d's
 *   approximate record (`--approx-forget llmd|peer`); a key left out keeps plugin.go's default,
 *   as its factory does (it unmarshals the parameters over the defaults).
 */
import {
  DEFAULT_LLMD_PREFIX_CONFIG,
  type LlmdPrefixConfig,
} from '../router/index/approxForgetting.ts';
import type { PolicyOptions } from '../router/registry.ts';
import { UsageError } from './args.ts';
import { options, str } from './options/table.ts';

/** The policies whose scorers `--scorer-weights` weighs. */
export const LLMD_FAMILY = ['llmd', 'llmd-precise'] as const;

const WEIGHT_KEYS = ['prefix', 'kv', 'queue'] as const;
type WeightKey = (typeof WEIGHT_KEYS)[number];

/** Each key's option in llmd's and llmd-precise's tunables. */
const WEIGHT_OPTIONS: Record<WeightKey, readonly [keyof PolicyOptions, keyof PolicyOptions]> = {
  prefix: ['prefixWeight', 'precisePrefixWeight'],
  kv: ['kvWeight', 'preciseKvWeight'],
  queue: ['queueWeight', 'preciseQueueWeight'],
};

const PREFIX_KEYS = Object.keys(DEFAULT_LLMD_PREFIX_CONFIG) as (keyof LlmdPrefixConfig)[];

const WEIGHTS_HELP =
  `the llmd family's (${LLMD_FAMILY.join(', ')}) scorer weights as llm-d's ` +
  'EndpointPickerConfig sets them, keys prefix, kv, queue (each >= 0; a key left out keeps ' +
  "the policy's default: llmd 3/2/2, llmd-precise 2/1/1), e.g. prefix=1,kv=1,queue=1";
const PREFIX_HELP =
  "llm-d's estimated prefix-cache-scorer parameters (with --approx-forget llmd or peer), keys " +
  `${PREFIX_KEYS.join(', ')} (integers >= 1; default ${formatPrefixConfig(DEFAULT_LLMD_PREFIX_CONFIG)}): ` +
  'blocks of hashBlockSize characters (4 a token), only the first maxPrefixBlocksToMatch ' +
  'hashed, an LRU of lruCapacityPerServer blocks per pod';

// biome-ignore format: one option a line
export const LLMD_SCORER_OPTIONS = options({
  'scorer-weights': str('K=W,...', WEIGHTS_HELP),
  'prefix-cache-scorer': str('K=V,...', PREFIX_HELP),
});

export function formatPrefixConfig(c: Readonly<LlmdPrefixConfig>): string {
  return PREFIX_KEYS.map((k) => `${k}=${c[k]}`).join(',');
}

/** `KEY=VALUE,...` as pairs; `flag` and `accepted` name the error. */
function pairs(raw: string, flag: string, accepted: readonly string[]): [string, string][] {
  const usage = `--${flag} takes KEY=VALUE pairs, keys ${accepted.join(', ')}`;
  const seen = new Set<string>();
  return raw.split(',').map((item) => {
    const at = item.indexOf('=');
    const key = (at < 0 ? item : item.slice(0, at)).trim();
    if (at < 0 || !accepted.includes(key)) {
      throw new UsageError(`${usage}; got '${item.trim()}'`);
    }
    if (seen.has(key)) throw new UsageError(`--${flag} gives ${key} twice`);
    seen.add(key);
    return [key, item.slice(at + 1).trim()];
  });
}

/** `--scorer-weights`: the llmd family's weights as policy options. */
export function parseScorerWeights(raw: string): PolicyOptions {
  const out: Record<string, number> = {};
  for (const [key, value] of pairs(raw, 'scorer-weights', WEIGHT_KEYS)) {
    const weight = Number(value);
    if (value === '' || !Number.isFinite(weight) || weight < 0) {
      throw new UsageError(`--scorer-weights: ${key} takes a weight >= 0, got '${value}'`);
    }
    for (const option of WEIGHT_OPTIONS[key as WeightKey]) out[option] = weight;
  }
  return out as PolicyOptions;
}

/** `--prefix-cache-scorer`: plugin.go's parameters over its defaults. */
export function parsePrefixCacheScorer(raw: string): LlmdPrefixConfig {
  const config = { ...DEFAULT_LLMD_PREFIX_CONFIG };
  for (const [key, value] of pairs(raw, 'prefix-cache-scorer', PREFIX_KEYS)) {
    const n = Number(value);
    if (value === '' || !Number.isInteger(n) || n < 1) {
      throw new UsageError(`--prefix-cache-scorer: ${key} takes an integer >= 1, got '${value}'`);
    }
    config[key as keyof LlmdPrefixConfig] = n;
  }
  return config;
}

/** `--scorer-weights` weighs the llmd family only: an explicit --policy must name one of it. */
export function checkScorerWeightsPolicies(policies: readonly string[]): void {
  if (policies.some((p) => (LLMD_FAMILY as readonly string[]).includes(p))) return;
  throw new UsageError(
    `--scorer-weights weighs the scorers of ${LLMD_FAMILY.join(', ')}; --policy names none of them ` +
      `(${policies.join(', ')})`,
  );
}

/** `--prefix-cache-scorer` shapes llm-d's approximate record only. */
export function checkPrefixCacheScorerMode(approxForget: string | undefined): void {
  if (approxForget === 'llmd' || approxForget === 'peer') return;
  throw new UsageError(
    "--prefix-cache-scorer sets llm-d's approximate record: give it with --approx-forget llmd " +
      `or peer (and --index approx), got --approx-forget ${approxForget ?? 'kvroute (default)'}`,
  );
}
