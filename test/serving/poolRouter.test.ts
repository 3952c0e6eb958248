/**
 * A model pool's router options (src/serving/poolRouter.ts), as `kvroute serve` and `kvroute epp`
 * build every pool's router: the config's defaults give the router no policy options and
 * kvroute's own record; delay-cost's decode term and llm-d's scorer settings reach the policy
 * and the approximate index.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Router } from '../../src/router/index.ts';
import type { LlmdPolicy } from '../../src/router/policies/llmd.ts';
import type { LlmdPrecisePolicy } from '../../src/router/policies/llmdPrecise.ts';
import { makePolicy } from '../../src/router/registry.ts';
import { defaultConfig } from '../../src/serving/config.ts';
import { poolRouterOptions } from '../../src/serving/poolRouter.ts';

describe('poolRouterOptions', () => {
  test('the defaults: no policy options, no peer record, no sessions', () => {
    const o = poolRouterOptions(defaultConfig());
    assert.equal(o.policyOptions, undefined);
    assert.equal(o.approxForgetting, undefined);
    assert.equal(o.sessions, undefined);
    assert.equal(o.policy, defaultConfig().policy);
  });

  test("delay-cost's decode term and the scorer weights, side by side", () => {
    const o = poolRouterOptions({
      ...defaultConfig(),
      policy: 'llmd-precise',
      decodeCost: { tokens: 40, budgetTokens: 512 },
      scorerWeights: { kv: 0 },
    });
    assert.deepEqual(o.policyOptions, {
      decodeCostTokens: 40,
      budgetTokens: 512,
      kvWeight: 0,
      preciseKvWeight: 0,
    });
    const precise = makePolicy('llmd-precise', o.policyOptions) as LlmdPrecisePolicy;
    assert.deepEqual(
      [
        precise.tunables.precisePrefixWeight,
        precise.tunables.preciseKvWeight,
        precise.tunables.preciseQueueWeight,
      ],
      [2, 0, 1],
    );
  });

  test("the estimated scorer's record only with the approximate index", () => {
    const prefixCacheScorer = {
      hashBlockSize: 64,
      maxPrefixBlocksToMatch: 4,
      lruCapacityPerServer: 100,
    };
    const events = poolRouterOptions({ ...defaultConfig(), policy: 'llmd', prefixCacheScorer });
    assert.equal(events.approxForgetting, undefined);
    const approx = poolRouterOptions({
      ...defaultConfig(),
      policy: 'llmd',
      index: 'approx',
      prefixCacheScorer,
    });
    assert.equal(approx.approxForgetting?.capacityBlocks, 100);
    assert.equal(approx.approxForgetting?.maxPrefixBlocks, 4);
    // llmd's prefix term counts the blocks that scorer hashes (llmd.ts).
    assert.equal(approx.policyOptions?.prefixMaxBlocks, 4);
    const llmd = makePolicy('llmd', approx.policyOptions) as LlmdPolicy;
    assert.equal(llmd.tunables.prefixWeight, 3);
    // The router takes them whole.
    assert.equal(new Router(approx).policyName, 'llmd');
  });
});
