/**
 * llm-d's scorer settings as its EndpointPickerConfig writes them, read once for `kvroute sim`,
 * `serve` and `epp`, from a flag or from serve's config file (`epp` reads the same file):
 * - `scorer-weights` (`prefix=W,kv=W,queue=W`, or a mapping `{prefix: W, kv: W, queue: W}`): the
 *   scheduling profile's weights of the prefix, kv-cache and queue scorers, for the llmd family
 *   (`llmd`, `llmd-precise`); a key left out keeps that policy's default (llmd.ts,
 *   llmdPrecise.ts).
 * - `prefix-cache-scorer` (`hashBlockSize=C,maxPrefixBlocksToMatch=N,lruCapacityPerServer=N`, or
 *   the same as a mapping): the estimated prefix-cache-scorer's parameters (Gateway API inference
 *   extension v1.0.1, pkg/epp/scheduling/framework/plugins/multi/prefix/plugin.go, `Config`), for
 *   llm-d's approximate record; a key left out keeps plugin.go's default, as its factory does (it
 *   unmarshals the parameters over the defaults).
 * A bad value is one error naming the flag (or the config key) and the accepted keys.
 */
import {
  type ApproxForgetting,
  DEFAULT_LLMD_PREFIX_CONFIG,
  type LlmdPrefixConfig,
  llmdPrefixForgetting,
} from '../router/index/approxForgetting.ts';
import type { PolicyOptions } from '../router/registry.ts';
import { isRecord } from './configValues.ts';
import { GatewayError } from './errors.ts';

/** The policies whose scorers `scorer-weights` weighs. */
export const LLMD_FAMILY = ['llmd', 'llmd-precise'] as const;

export const SCORER_WEIGHT_KEYS = ['prefix', 'kv', 'queue'] as const;
type WeightKey = (typeof SCORER_WEIGHT_KEYS)[number];

/** The weights given; a key absent keeps the policy's default. */
export type ScorerWeights = Partial<Record<WeightKey, number>>;

export const PREFIX_CACHE_SCORER_KEYS = Object.keys(
  DEFAULT_LLMD_PREFIX_CONFIG,
) as (keyof LlmdPrefixConfig)[];

/** Each key's option in llmd's and llmd-precise's tunables. */
const WEIGHT_OPTIONS: Record<WeightKey, readonly [keyof PolicyOptions, keyof PolicyOptions]> = {
  prefix: ['prefixWeight', 'precisePrefixWeight'],
  kv: ['kvWeight', 'preciseKvWeight'],
  queue: ['queueWeight', 'preciseQueueWeight'],
};

/**
 * Where a setting is read from: its name in errors (`--scorer-weights`, or
 * `config: scorer-weights`) and the error a bad value throws (a usage error, a config error).
 */
export interface SettingSource {
  name: string;
  fail: (message: string) => Error;
}

/** `scorer-weights`: each weight a number >= 0. */
export function parseScorerWeights(raw: unknown, from: SettingSource): ScorerWeights {
  const out: ScorerWeights = {};
  for (const [key, value] of entriesOf(raw, SCORER_WEIGHT_KEYS, from)) {
    const weight = numberOf(value);
    if (!Number.isFinite(weight) || weight < 0) {
      throw from.fail(`${from.name}: ${key} takes a weight >= 0, got '${String(value)}'`);
    }
    out[key as WeightKey] = weight;
  }
  return out;
}

/** `prefix-cache-scorer`: plugin.go's parameters, each an integer >= 1, over `base`. */
export function parsePrefixCacheScorer(
  raw: unknown,
  from: SettingSource,
  base: Readonly<LlmdPrefixConfig> = DEFAULT_LLMD_PREFIX_CONFIG,
): LlmdPrefixConfig {
  const config = { ...base };
  for (const [key, value] of entriesOf(raw, PREFIX_CACHE_SCORER_KEYS, from)) {
    const n = numberOf(value);
    if (!Number.isInteger(n) || n < 1) {
      throw from.fail(`${from.name}: ${key} takes an integer >= 1, got '${String(value)}'`);
    }
    config[key as keyof LlmdPrefixConfig] = n;
  }
  return config;
}

/** The settings as serve's config holds them. */
export interface ScorerSettings {
  scorerWeights?: ScorerWeights;
  prefixCacheScorer?: LlmdPrefixConfig;
}

/** A config key's errors: `config: KEY ...`, its param the key. */
const configKey = (key: string): SettingSource => ({
  name: `config: ${key}`,
  fail: (message) => new GatewayError('ERR_CONFIG', message, { param: key }),
});

/** The config file's `scorer-weights` and `prefix-cache-scorer` onto `out`, where given. */
export function readScorersDoc(doc: Record<string, unknown>, out: ScorerSettings): void {
  const weights = doc['scorer-weights'];
  if (weights !== undefined) {
    out.scorerWeights = parseScorerWeights(weights, configKey('scorer-weights'));
  }
  const prefix = doc['prefix-cache-scorer'];
  if (prefix !== undefined) {
    out.prefixCacheScorer = parsePrefixCacheScorer(prefix, configKey('prefix-cache-scorer'));
  }
}

/** The weights as llmd's and llmd-precise's options (each policy reads its own). */
export function scorerWeightOptions(weights: Readonly<ScorerWeights>): PolicyOptions {
  const out: Record<string, number> = {};
  for (const key of SCORER_WEIGHT_KEYS) {
    const weight = weights[key];
    if (weight === undefined) continue;
    for (const option of WEIGHT_OPTIONS[key]) out[option] = weight;
  }
  return out as PolicyOptions;
}

/**
 * What the settings ask of a pool's router, its index `indexMode` keyed in blocks of `blockSize`
 * tokens: the weights as policy options and, with the approximate index, llm-d's record, whose
 * scorer hashes only a prompt's first blocks, so llmd's prefix term counts those (llmd.ts), as
 * the simulator builds it (src/sim/routerAdapter.ts).
 */
export function scorerRouterOptions(
  s: Readonly<ScorerSettings>,
  indexMode: string,
  blockSize: number,
): { policyOptions: PolicyOptions; approxForgetting?: ApproxForgetting } {
  const policyOptions = s.scorerWeights ? scorerWeightOptions(s.scorerWeights) : {};
  if (s.prefixCacheScorer === undefined || indexMode !== 'approx') return { policyOptions };
  const approxForgetting = llmdPrefixForgetting(s.prefixCacheScorer, blockSize);
  const prefixMaxBlocks = approxForgetting.maxPrefixBlocks;
  return {
    policyOptions: { ...policyOptions, ...(prefixMaxBlocks !== undefined && { prefixMaxBlocks }) },
    approxForgetting,
  };
}

/** `scorer-weights` weighs the llmd family only: `policies` must name one of it. */
export function weighsAnyOf(policies: readonly string[]): boolean {
  return policies.some((p) => (LLMD_FAMILY as readonly string[]).includes(p));
}

export function formatPrefixConfig(c: Readonly<LlmdPrefixConfig>): string {
  return PREFIX_CACHE_SCORER_KEYS.map((k) => `${k}=${c[k]}`).join(',');
}

export function formatScorerWeights(w: Readonly<ScorerWeights>): string {
  return SCORER_WEIGHT_KEYS.filter((k) => w[k] !== undefined)
    .map((k) => `${k}=${w[k]}`)
    .join(',');
}

/** `KEY=VALUE,...` text, or a mapping, as pairs of accepted keys, each once. */
function entriesOf(
  raw: unknown,
  accepted: readonly string[],
  from: SettingSource,
): [string, unknown][] {
  if (isRecord(raw)) {
    return Object.entries(raw).map(([key, value]) => {
      if (!accepted.includes(key)) {
        throw from.fail(`${from.name} takes keys ${accepted.join(', ')}; got '${key}'`);
      }
      return [key, value];
    });
  }
  const usage = `${from.name} takes KEY=VALUE pairs, keys ${accepted.join(', ')}`;
  if (typeof raw !== 'string') throw from.fail(`${usage}, or a mapping of them`);
  const seen = new Set<string>();
  return raw.split(',').map((item) => {
    const at = item.indexOf('=');
    const key = (at < 0 ? item : item.slice(0, at)).trim();
    if (at < 0 || !accepted.includes(key)) throw from.fail(`${usage}; got '${item.trim()}'`);
    if (seen.has(key)) throw from.fail(`${from.name} gives ${key} twice`);
    seen.add(key);
    return [key, item.slice(at + 1).trim()];
  });
}

/** A number, or a number's text; anything else NaN. */
function numberOf(value: unknown): number {
  if (typeof value === 'number') return value;
  if (typeof value !== 'string' || value.trim() === '') return Number.NaN;
  return Number(value);
}
