/**
 * `kvroute sim --scorer-weights` and `--prefix-cache-scorer` (src/cli/llmdScorerFlags.ts): llm-d's
 * EndpointPickerConfig weights and prefix-cache-scorer parameters as flags, each reaching the
 * policy or the approximate record, and a bad value is one line naming the flag and its keys.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { UsageError } from '../../src/cli/args.ts';
import { parseSimFlags } from '../../src/cli/sim.ts';
import { makePolicy } from '../../src/router/registry.ts';
import type { LlmdPolicy } from '../../src/router/policies/llmd.ts';
import type { LlmdPrecisePolicy } from '../../src/router/policies/llmdPrecise.ts';
import { ReplayTally } from '../../src/sim/published/figures.ts';
import { simulate } from '../../src/sim/run.ts';

function parsed(args: string[]) {
  const p = parseSimFlags(args);
  assert.ok(p !== 'help');
  return p;
}

function usageError(args: string[], message: string) {
  assert.throws(
    () => parseSimFlags(args),
    (e: unknown) => e instanceof UsageError && e.message === message,
  );
}

describe('--scorer-weights', () => {
  test("sets the llmd family's weights; a key left out keeps each policy's default", () => {
    const p = parsed([
      '--policy',
      'llmd,llmd-precise',
      '--scorer-weights',
      'prefix=1,kv=1,queue=1',
    ]);
    const options = p.base.router.policyOptions!;
    const llmd = makePolicy('llmd', options) as LlmdPolicy;
    assert.deepEqual(
      [llmd.tunables.prefixWeight, llmd.tunables.kvWeight, llmd.tunables.queueWeight],
      [1, 1, 1],
    );
    const precise = makePolicy('llmd-precise', options) as LlmdPrecisePolicy;
    assert.deepEqual(
      [
        precise.tunables.precisePrefixWeight,
        precise.tunables.preciseKvWeight,
        precise.tunables.preciseQueueWeight,
      ],
      [1, 1, 1],
    );
    const some = parsed(['--policy', 'llmd-precise', '--scorer-weights', 'prefix=3']);
    const p3 = makePolicy('llmd-precise', some.base.router.policyOptions) as LlmdPrecisePolicy;
    assert.deepEqual(
      [
        p3.tunables.precisePrefixWeight,
        p3.tunables.preciseKvWeight,
        p3.tunables.preciseQueueWeight,
      ],
      [3, 1, 1],
    );
    // Without the flag, no policy options at all (every run as before).
    assert.equal(parsed([]).base.router.policyOptions, undefined);
  });

  test('bad keys, values and policies are usage errors naming the flag', () => {
    usageError(
      ['--scorer-weights', 'prefix=1,lora=2'],
      "--scorer-weights takes KEY=VALUE pairs, keys prefix, kv, queue; got 'lora=2'",
    );
    usageError(
      ['--scorer-weights', 'prefix'],
      "--scorer-weights takes KEY=VALUE pairs, keys prefix, kv, queue; got 'prefix'",
    );
    usageError(['--scorer-weights', 'kv=-1'], "--scorer-weights: kv takes a weight >= 0, got '-1'");
    usageError(['--scorer-weights', 'kv='], "--scorer-weights: kv takes a weight >= 0, got ''");
    usageError(['--scorer-weights', 'kv=1,kv=2'], '--scorer-weights gives kv twice');
    usageError(
      ['--policy', 'random,cost', '--scorer-weights', 'prefix=1'],
      '--scorer-weights weighs the scorers of llmd, llmd-precise; --policy names none of them (random, cost)',
    );
  });
});

describe('--prefix-cache-scorer', () => {
  test("plugin.go's parameters over its defaults, with --approx-forget llmd or peer", () => {
    const p = parsed([
      ...['--index', 'approx', '--approx-forget', 'peer'],
      ...['--prefix-cache-scorer', 'hashBlockSize=256,lruCapacityPerServer=2200'],
    ]);
    assert.deepEqual(p.base.router.llmdPrefix, {
      hashBlockSize: 256,
      maxPrefixBlocksToMatch: 256,
      lruCapacityPerServer: 2200,
    });
    assert.equal(parsed([]).base.router.llmdPrefix, undefined);
  });

  test('bad keys, values, or no llm-d record are usage errors naming the flag', () => {
    const forget = ['--approx-forget', 'llmd'];
    usageError(
      [...forget, '--prefix-cache-scorer', 'blockSize=64'],
      '--prefix-cache-scorer takes KEY=VALUE pairs, keys hashBlockSize, maxPrefixBlocksToMatch, ' +
        "lruCapacityPerServer; got 'blockSize=64'",
    );
    usageError(
      [...forget, '--prefix-cache-scorer', 'lruCapacityPerServer=0'],
      "--prefix-cache-scorer: lruCapacityPerServer takes an integer >= 1, got '0'",
    );
    usageError(
      [...forget, '--prefix-cache-scorer', 'hashBlockSize=2.5'],
      "--prefix-cache-scorer: hashBlockSize takes an integer >= 1, got '2.5'",
    );
    usageError(
      ['--prefix-cache-scorer', 'hashBlockSize=64'],
      "--prefix-cache-scorer sets llm-d's approximate record: give it with --approx-forget llmd " +
        'or peer (and --index approx), got --approx-forget kvroute (default)',
    );
  });

  test("a smaller LRU forgets: llm-d's picker on its own record keeps fewer hits", () => {
    const args = [
      ...['--workload', 'shared-prefix', '--num-groups', '16', '--num-prompts-per-group', '4'],
      ...['--system-prompt-len', '2000', '--question-len', '200', '--output-len', '20'],
      ...['--replicas', '2', '--concurrency', '8', '--duration', '20', '--warmup', '0'],
      ...['--index', 'approx', '--approx-forget', 'peer'],
    ];
    const hitRate = (extra: string[]) => {
      const p = parsed([...args, ...extra]);
      const tally = new ReplayTally(20);
      simulate({
        ...p.base,
        router: { ...p.base.router, policy: 'llmd' },
        onRequest: (r) => tally.add(r),
      });
      return tally.figures().hitRate;
    };
    const plenty = hitRate([]);
    // 200 blocks of 64 characters (16 tokens): under two groups' prefixes a pod.
    const small = hitRate(['--prefix-cache-scorer', 'lruCapacityPerServer=200']);
    assert.ok(small < plenty, `hit rate with a 200-block LRU ${small} vs 31,250 ${plenty}`);
  });
});
